"""Activation checkpointing: each residual block of an MLP recomputed in the backward
(torch.utils.checkpoint, non-reentrant), Adam."""
import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Deep(nn.Module):
    def __init__(self, width=64, depth=6):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return self.head(x).squeeze(-1)


model = Deep().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
xs, ys = torch.randn(steps, 64, 64), torch.randn(steps, 64)

for step in range(steps):
    x, y = xs[step].to(device), ys[step].to(device)
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
