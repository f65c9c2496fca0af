"""A zoo workload as the plainest training script: batches already on the GPU, a module-level loop."""

import torch

from zoo_setup import OPTIMIZERS, arguments, setup

args = arguments()
model, criterion, batches = setup(args.workload)
if OPTIMIZERS[args.workload] == "adamw":
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
else:
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
for step in range(args.steps):
    x, y = batches[step % len(batches)]
    optimizer.zero_grad(set_to_none=True)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.6f}")
