"""A zoo workload as most training scripts are written: the loss read on the host every step
(``running_loss += loss.item()``) and printed now and then. The read is a sync between steps,
which a full-iteration graph cannot take in: the host waits there for the replay, so part of the
host work between steps no longer runs beside the GPU's. It builds its optimizer in the script
as zoo_plain.py does (patch reads the class there and makes an Adam capturable in the rewrite),
so the two share their first lines: each must read as a user's script, whole."""

import torch

from zoo_setup import OPTIMIZERS, arguments, setup

args = arguments()
model, criterion, batches = setup(args.workload)
if OPTIMIZERS[args.workload] == "adamw":
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
else:
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
running_loss = 0.0
for step in range(args.steps):
    x, y = batches[step % len(batches)]
    optimizer.zero_grad(set_to_none=True)
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    running_loss += loss.item()
    if step % 50 == 49:
        print(f"step {step + 1}: loss {running_loss / 50:.4f}")
        running_loss = 0.0
print(f"final loss {loss.item():.6f}")
