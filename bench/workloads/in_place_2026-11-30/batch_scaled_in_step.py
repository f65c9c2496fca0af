"""A loop that changes its batch in place inside the step, between the backward and the
optimizer step: the inputs of a fixed set of batches decay a little at every visit (x.mul_),
and the targets are nudged by the loss (y[:, 0] = ...). Eager changes the batches of the
list; a rewrite must too."""
import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 4)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
pairs = [(torch.randn(128, 64, device="cuda"), torch.randn(128, 4, device="cuda")) for _ in range(8)]
steps = int(os.environ.get("CG_STEPS", "400"))
for step in range(steps):
    x, y = pairs[step % len(pairs)]
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    x.mul_(0.999)
    y[:, 0] = y[:, 0] * 0.999 + 0.001 * loss.detach()
    opt.step()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.5f}")
print(f"inputs {sum(float(x.abs().sum()) for x, _ in pairs):.4f} targets {sum(float(y.sum()) for _, y in pairs):.4f}")
