"""A zoo workload with mixed precision, a GradScaler and an LR scheduler: the optimizer step
stays eager under every graph scope (the scaler checks for infs on the host)."""

import torch

from zoo_setup import arguments, make_optimizer, setup

args = arguments()
model, criterion, batches = setup(args.workload)
optimizer = make_optimizer(args.workload, model)
scaler = torch.amp.GradScaler("cuda")
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=50, gamma=0.9)
for step in range(args.steps):
    x, y = batches[step % len(batches)]
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    scheduler.step()
print(f"final loss {loss.item():.6f}")
