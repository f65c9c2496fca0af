"""DDP training with gradient accumulation under torchrun (bench/gpu_ddp.sh): the micro-batches
before the last of each optimizer step run under ``model.no_sync()``, so that DDP all-reduces
the gradients once per step, not once per micro-batch.

    torchrun --nproc-per-node 2 ddp_accumulate.py --model transformer --accumulate 4 --steps 100
"""

from contextlib import nullcontext

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_common import arguments, build, loader, report, setup


def main():
    args = arguments(accumulate=4)
    device = setup()
    net, shape = build(args.model, args.width)
    model = DDP(net.to(device), device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.MSELoss()
    sampler, batches = loader(args, shape)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, (x, y) in enumerate(batches):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            sync = (i + 1) % args.accumulate == 0
            with nullcontext() if sync else model.no_sync():
                loss = loss_fn(model(x), y) / args.accumulate
                loss.backward()
            if sync:
                optimizer.step()
                optimizer.zero_grad()
    report(model, loss)


if __name__ == "__main__":
    main()
