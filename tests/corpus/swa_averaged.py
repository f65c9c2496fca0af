"""Stochastic weight averaging: an AveragedModel updated after every optimizer step, SGD with a
cosine schedule stepped per batch, the averaged model evaluated at the end."""
import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import AveragedModel

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))

model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
swa_model = AveragedModel(model)
xs, ys = torch.randn(steps, 64, 32), torch.randint(0, 4, (steps, 64))

for step in range(steps):
    x, y = xs[step].to(device), ys[step].to(device)
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    swa_model.update_parameters(model)
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

with torch.no_grad():
    averaged = F.cross_entropy(swa_model(xs[0].to(device)), ys[0].to(device))
print(f"final loss {loss.item():.6f} averaged {averaged.item():.6f}")
