# fine-tuning with per-parameter-group learning rates (backbone 10x lower than head); the backbone group is frozen for two epochs and unfrozen at epoch 2
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        return self.head(self.backbone(x))


model = Net().to(device)
for p in model.backbone.parameters():
    p.requires_grad = False
optimizer = torch.optim.Adam([
    {"params": model.backbone.parameters(), "lr": 1e-4},
    {"params": model.head.parameters(), "lr": 1e-3},
], weight_decay=1e-5)

X = torch.randn(40, 32, 24, device=device)
Y = (X @ torch.randn(24, 5, device=device)).argmax(-1)
unfreeze_epoch = 2

for epoch in range(5):
    if epoch == unfreeze_epoch:
        for p in model.backbone.parameters():
            p.requires_grad = True
        print("unfroze the backbone")
    model.train()
    for i in range(X.size(0)):
        logits = model(X[i])
        loss = F.cross_entropy(logits, Y[i])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f} lrs {[g['lr'] for g in optimizer.param_groups]}")

state_steps = sorted(int(s["step"]) for s in optimizer.state.values())
print("adam steps per param", state_steps)
print("backbone checksum", round(sum(p.double().sum() for p in model.backbone.parameters()).item(), 4))
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
