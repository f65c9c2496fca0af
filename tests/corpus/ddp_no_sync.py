import contextlib
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
net = nn.Sequential(nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 128)).cuda()
ddp_model = DistributedDataParallel(net, device_ids=[local_rank])
optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.01)
accumulation = 4
for step, x in enumerate(torch.randn(64, 128, device="cuda") for _ in range(800)):
    last = (step + 1) % accumulation == 0
    context = contextlib.nullcontext() if last else ddp_model.no_sync()
    with context:
        loss = ddp_model(x).square().mean() / accumulation
        loss.backward()
    if last:
        optimizer.step()
        optimizer.zero_grad()
dist.destroy_process_group()
