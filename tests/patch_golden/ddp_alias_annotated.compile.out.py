"""DistributedDataParallel through an alias made by assignment, bound by an annotated
assignment (`model: DDP = ...`): the model is DDP all the same, built under a side stream,
and graphed as the module it wraps. Runs on the CPU (gloo)."""
import os

import torch
import torch.distributed as dist
from torch import nn

DDP = torch.nn.parallel.DistributedDataParallel

cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
model: DDP = DDP(net, device_ids=[device.index] if cuda else None)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
generator = torch.Generator().manual_seed(rank)
steps = int(os.environ.get("CG_STEPS", "200"))
data = [(torch.randn(8, 16, generator=generator), torch.randn(8, 1, generator=generator)) for _ in range(steps)]
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for x, y in data:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, y = x.to(device), y.to(device)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(_cg_compiled_model(x), y)
    loss.backward()
    optimizer.step()
print(f"rank {rank}: loss {loss.item():.6f}")
dist.destroy_process_group()
