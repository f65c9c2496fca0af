"""Two DDP models of one loop: the encoder is wrapped where the loop can see it, the head by a
helper of the script (`head = wrap(head)`), which cannot be traced to a construction. Each graphed
model must be the module DDP wraps, never the wrapper (whose graph would skip DDP's all-reduce),
and both constructions are built under a side stream. Runs on the CPU (gloo)."""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")


def wrap(module):
    return DDP(module, device_ids=[device.index] if cuda else None)


torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU()).to(device)
encoder = DDP(encoder, device_ids=[device.index] if cuda else None)
head = nn.Linear(32, 4).to(device)
head = wrap(head)
optimizer = torch.optim.SGD(list(encoder.parameters()) + list(head.parameters()), lr=0.05)
generator = torch.Generator().manual_seed(rank)
steps = int(os.environ.get("CG_STEPS", "200"))
data = [(torch.randn(8, 16, generator=generator), torch.randint(0, 4, (8,), generator=generator))
        for _ in range(steps)]
_cg_compiled_encoder = torch.compile(encoder, mode="reduce-overhead")  # cg-advise: scope compile
_cg_compiled_head = torch.compile(head, mode="reduce-overhead")  # cg-advise: scope compile

for x, y in data:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, y = x.to(device), y.to(device)
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(_cg_compiled_head(_cg_compiled_encoder(x)), y)
    loss.backward()
    optimizer.step()
print(f"rank {rank}: loss {loss.item():.6f}")
dist.destroy_process_group()
