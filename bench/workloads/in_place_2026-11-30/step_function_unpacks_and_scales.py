"""A step function that unpacks the batch it is handed and scales its inputs in place after the
backward (torch.clamp_ on one, mul_ on the other): the parts are views of the loop's batch,
which eager changes at every visit."""
import os

import torch
from torch import nn


def train_step(model, optimizer, batch):
    inputs, targets = batch
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(inputs), targets)
    loss.backward()
    torch.clamp_(inputs, -2.0, 2.0)
    targets.mul_(0.99)
    optimizer.step()
    return loss


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [(torch.randn(32, 16, device="cuda") * 2, torch.randn(32, 1, device="cuda")) for _ in range(4)]
    for step in range(int(os.environ.get("CG_STEPS", "400"))):
        loss = train_step(model, optimizer, batches[step % len(batches)])
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.5f}")
    print(f"inputs {sum(float(x.abs().sum()) for x, _ in batches):.4f} "
          f"targets {sum(float(y.sum()) for _, y in batches):.4f}")


if __name__ == "__main__":
    main()
