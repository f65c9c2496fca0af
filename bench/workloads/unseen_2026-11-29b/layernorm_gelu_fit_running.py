"""A function-fitting example: a two-layer MLP with LayerNorm and GELU fitting y = sin(3x) * x on pre-drawn inputs, MSELoss, Adam, the loss added to a Python float every 50 steps and printed."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "600"))
bank, batch_size, hidden = 32, 64, 128
xs = torch.rand(bank, batch_size, 1, device=device) * 4 - 2
ys = torch.sin(3 * xs) * xs
model = nn.Sequential(
    nn.Linear(1, hidden), nn.LayerNorm(hidden), nn.GELU(),
    nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU(),
    nn.Linear(hidden, 1)).to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

running = 0.0
for step in range(steps):
    x = xs[step % bank]
    y = ys[step % bank]
    optimizer.zero_grad()
    pred = model(x)
    loss = criterion(pred, y)
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        running += loss.item()
        print(f"step {step} loss {loss.item():.4f} running {running:.4f}")

print(f"final loss {loss.item():.6f}")
