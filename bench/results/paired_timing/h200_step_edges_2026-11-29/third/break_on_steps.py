import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
max_steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
loader = [(torch.randn(8, 16, device=device), torch.randint(0, 4, (8,), device=device)) for _ in range(max_steps * 2)]

for step, (x, y) in enumerate(loader):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    if step + 1 >= max_steps:
        break

print(f"stopped after {step + 1} steps, loss {loss.item():.6f}")
