"""A CPU inference loop for the tune harness: batch sizes vary from call to call."""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--calls", type=int, default=40)
args = parser.parse_args()
model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).eval()
with torch.no_grad():
    for i in range(args.calls):
        out = model(torch.randn(1 + i % 5, 8))
