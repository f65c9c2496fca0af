"""A wide MLP on large batches in full float32: each step's matrix multiplications keep the GPU
busy far longer than its launches take."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "60"))
width = 4096 if device == "cuda" else 256

model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                      nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
x = torch.randn(2048, width, device=device)
y = torch.randint(0, 10, (2048,), device=device)

for step in range(steps):
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
