"""A small CPU training loop with three top-level submodules (tests of the NVTX bootstrap)."""
import argparse
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.middle = nn.Linear(16, 16)
        self.decoder = nn.Linear(16, 2)

    def forward(self, x):
        return self.decoder(self.middle(self.encoder(x)))


parser = argparse.ArgumentParser(description="CPU training loop")
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--inference", action="store_true")
parser.add_argument("--freeze-encoder", action="store_true")
parser.add_argument("--adamw", action="store_true", help="AdamW instead of SGD")
parser.add_argument("--sanity-check", action="store_true", help="one eval-mode forward first, before any freezing")
args = parser.parse_args()
print("argv", sys.argv[1:])
torch.manual_seed(0)
model, loss_fn = Net(), nn.MSELoss()
x, y = torch.randn(4, 8), torch.randn(4, 2)
if args.sanity_check:
    model.eval()
    with torch.no_grad():
        model(x)
    model.train()
if args.freeze_encoder:
    model.encoder.requires_grad_(False)
trained = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(trained, lr=0.01) if args.adamw else torch.optim.SGD(trained, lr=0.01)
if args.inference:
    model.eval()
    with torch.no_grad():
        for _ in range(args.steps):
            model(x)
else:
    for _ in range(args.steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
print("done")
