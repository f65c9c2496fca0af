"""A zoo workload fed by a DataLoader from host memory (pinned, copied non-blocking), in a
function: the host work between steps that no graph removes."""

import math

import torch
from torch.utils.data import DataLoader, TensorDataset

from zoo_setup import OPTIMIZERS, arguments, setup


def train(args):
    model, criterion, batches = setup(args.workload, device="cpu", batches=8)
    model = model.cuda()
    if OPTIMIZERS[args.workload] == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    inputs = torch.cat([x for x, _ in batches])
    targets = torch.cat([y for _, y in batches])
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=len(batches[0][0]), shuffle=True,
                        pin_memory=True, drop_last=True)
    for epoch in range(math.ceil(args.steps / len(loader))):  # noqa: B007 - as training scripts write it
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    train(arguments())
