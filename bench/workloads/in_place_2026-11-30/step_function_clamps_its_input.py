"""A step function that clamps the batch it is handed in place after its update (a loop that
keeps its inputs in range for the next visit), called with the model and optimizer."""
import os

import torch
import torch.nn.functional as F
from torch import nn


def train_step(model, optimizer, inputs, targets):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()
    inputs.clamp_(-1.5, 1.5)
    return loss


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = [(torch.randn(64, 32, device="cuda") * 2, torch.randint(0, 10, (64,), device="cuda")) for _ in range(4)]
    for step in range(int(os.environ.get("CG_STEPS", "400"))):
        inputs, targets = batches[step % len(batches)]
        loss = train_step(model, optimizer, inputs, targets)
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.5f}")
    print(f"inputs {sum(float(x.abs().sum()) for x, _ in batches):.4f} final {loss.item():.6f}")


if __name__ == "__main__":
    main()
