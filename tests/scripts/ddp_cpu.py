"""A DDP training loop on the CPU (gloo) for tune's multi-process plumbing under torchrun:
deterministic; --perturb-rank N moves that rank's parameters by 0.5 after the all-reduce of
step --perturb-at (its parameters then differ from eager's after that step, the other ranks'
not yet: they see it only through the next steps' gradients)."""
import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--perturb-rank", type=int, default=-1)
parser.add_argument("--perturb-at", type=int, default=2)
args = parser.parse_args()
dist.init_process_group("gloo")
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
generator = torch.Generator().manual_seed(dist.get_rank())
x, y = torch.randn(32, 8, generator=generator), torch.randn(32, 1, generator=generator)
for step in range(args.steps):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    if step == args.perturb_at and dist.get_rank() == args.perturb_rank:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.5)
    optimizer.step()
print(f"rank {dist.get_rank()}: loss {loss.item():.6f}")
dist.destroy_process_group()
