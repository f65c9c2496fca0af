"""A CPU training loop for the tune harness: deterministic, with a --fail-at option."""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--fail-at", type=int, default=0)
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--dropout", type=float, default=0.0)
args = parser.parse_args()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(args.dropout), nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for step in range(args.steps):
    if args.fail_at and step == args.fail_at:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
