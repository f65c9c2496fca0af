"""A step that replaces an item of the list it is given (batch[0] = batch[0] * 0.5), after the
forward: a graph would read the tensor of its capture from then on; the rewrite must run it
eagerly (and say so) rather than train on stale inputs."""
import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
batches = [[torch.randn(32, 16, device="cuda"), torch.randn(32, 1, device="cuda")] for _ in range(4)]
for step in range(int(os.environ.get("CG_STEPS", "200"))):
    batch = batches[step % len(batches)]
    opt.zero_grad()
    loss = (model(batch[0]) - batch[1]).pow(2).mean()
    batch[1] = batch[1] * 0.99
    loss.backward()
    opt.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.5f}")
print(f"targets {sum(float(b[1].sum()) for b in batches):.4f}")
