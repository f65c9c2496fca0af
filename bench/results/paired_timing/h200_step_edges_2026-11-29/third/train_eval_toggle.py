import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 12, device=device), torch.randn(64, 1, device=device)
probe = torch.randn(8, 12, device=device)

for step in range(steps):
    model.train()
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        model.eval()
        with torch.no_grad():
            print(f"step {step} loss {loss.item():.6f} probe {model(probe).mean().item():.6f}")

model.eval()
with torch.no_grad():
    print(f"final loss {loss.item():.6f} probe {model(probe).mean().item():.6f}")
