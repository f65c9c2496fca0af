"""An epoch loop around the step loop, with the learning-rate scheduler stepped once an epoch
after the inner loop: the step loop itself never touches the learning rate, but a graph of it
must follow the new one each epoch."""
import os

import torch
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
optimizer = optim.Adam(model.parameters(), lr=0.01)
scheduler = StepLR(optimizer, step_size=1, gamma=0.1)
steps = int(os.environ.get("CG_STEPS", "100"))
data = [(torch.randn(64, 32), torch.randn(64, 1)) for _ in range(steps)]

for epoch in range(3):
    total = 0.0
    for x, y in data:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    scheduler.step()
    weights = sum(p.double().abs().sum().item() for p in model.parameters())
    print(f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.4f} mean loss {total / len(data):.6f} |w| {weights:.6f}")
