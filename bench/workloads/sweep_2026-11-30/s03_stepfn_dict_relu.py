# Tabular model: dict batch changed in place through F.relu(inplace=True) and torch.clamp_
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, features):
        return self.body(features)


def train_step(model, opt, batch):
    F.relu(batch["features"], inplace=True)
    torch.clamp_(batch["weights"], 0.0, 1.0)
    opt.zero_grad()
    logits = model(batch["features"])
    per = F.cross_entropy(logits, batch["label"], reduction="none")
    loss = (per * batch["weights"]).mean()
    loss.backward()
    opt.step()
    return loss


model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
batches = [{"features": torch.randn(128, 20, device=device),
            "weights": torch.randn(128, device=device) + 0.5,
            "label": torch.randint(0, 2, (128,), device=device)} for _ in range(10)]
for _epoch in range(3):
    for batch in batches:
        loss = train_step(model, opt, batch)
print("final loss", loss.item())
print("min feature", min(b["features"].min().item() for b in batches))
print("weight sum", sum(b["weights"].sum().item() for b in batches))
