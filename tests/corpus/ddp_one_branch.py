"""DDP in one branch only: under torchrun the model is DistributedDataParallel, run as a plain
script (one process, no process group) it is the bare module. A rewrite must graph what each
branch built: the module DDP wraps under torchrun, the model itself without it. Runs on the CPU
(gloo) both ways."""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

cuda = torch.cuda.is_available()
if "RANK" in os.environ:
    dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank() if dist.is_initialized() else 0
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
if dist.is_initialized():
    model = DDP(net, device_ids=[device.index] if cuda else None)
else:
    model = net
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
generator = torch.Generator().manual_seed(rank)
steps = int(os.environ.get("CG_STEPS", "200"))
data = [(torch.randn(8, 16, generator=generator), torch.randn(8, 1, generator=generator)) for _ in range(steps)]
for x, y in data:
    x, y = x.to(device), y.to(device)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print(f"rank {rank}: loss {loss.item():.6f}")
if dist.is_initialized():
    dist.destroy_process_group()
