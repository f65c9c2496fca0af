"""Mixup training: each batch mixed with a shuffled copy of itself, the weight drawn from a Beta
distribution on the host, the shuffle made on the host and copied to the GPU."""
import os

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
np.random.seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
inputs = torch.randn(steps, 64, 64)
targets = torch.randint(0, 10, (steps, 64))

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, y = inputs[step].to(device), targets[step].to(device)
    lam = float(np.random.beta(0.4, 0.4))
    index = torch.randperm(x.size(0)).to(device)
    mixed = lam * x + (1 - lam) * x[index]
    out = _cg_compiled_model(mixed)
    loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[index])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
