# Hugging Face style: the step hands its dict batch to a helper that pops the labels
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(24, 48), nn.GELU(), nn.Linear(48, 3))

    def forward(self, input_values):
        return self.net(input_values)


def compute_loss(model, inputs):
    labels = inputs.pop("labels")
    logits = model(**inputs)
    return F.cross_entropy(logits, labels)


model = Classifier().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = [{"input_values": torch.randn(64, 24, device=device),
            "labels": torch.randint(0, 3, (64,), device=device)} for _ in range(12)]
for epoch in range(3):
    for batch in batches:
        batch = dict(batch)
        optimizer.zero_grad()
        loss = compute_loss(model, batch)
        loss.backward()
        optimizer.step()
    print(epoch, loss.item())
