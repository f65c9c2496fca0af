"""A loop that carries a memory tensor from one step to the next, decays it in place inside the
step and then binds the name to a new tensor: from the second replay on, the loop's memory is
the graph's own output, which a copy back must leave alone."""
import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 32)).cuda()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [torch.randn(16, 32, device="cuda") for _ in range(8)]
memory = torch.zeros(16, 32, device="cuda")
for step in range(int(os.environ.get("CG_STEPS", "400"))):
    x = data[step % len(data)]
    opt.zero_grad()
    out = model(x + memory)
    memory.mul_(0.5)
    memory = memory + 0.1 * out.detach()
    loss = (out - x).pow(2).mean()
    loss.backward()
    opt.step()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.5f} memory {memory.abs().mean().item():.5f}")
print(f"final memory {memory.abs().sum().item():.4f}")
