"""DDP training under torchrun (bench/gpu_ddp.sh): one optimizer step per batch, data from
a DistributedSampler reshuffled each epoch.

    torchrun --nproc-per-node 2 ddp_train.py --model mlp --steps 300
"""

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_common import arguments, build, loader, report, setup


def main():
    args = arguments()
    device = setup()
    net, shape = build(args.model, args.width)
    model = DDP(net.to(device), device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.MSELoss()
    sampler, batches = loader(args, shape)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in batches:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
    report(model, loss)


if __name__ == "__main__":
    main()
