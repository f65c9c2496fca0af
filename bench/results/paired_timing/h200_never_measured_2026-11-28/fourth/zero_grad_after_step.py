import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
inputs = iter([(torch.randn(8, 16), torch.randn(8, 1)) for _ in range(steps)])
total = 0.0

step = 0
while step < steps:
    x, y = next(inputs)
    x, y = x.to(device), y.to(device)
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
    model.zero_grad(set_to_none=False)
    total += loss.item()
    step += 1

print(f"mean loss {total / steps:.6f} last {loss.item():.6f}")
