import os

import torch
import torch.distributed as dist
from torch import nn

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = nn.Linear(64, 64).cuda()
model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], find_unused_parameters=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for x in [torch.randn(32, 64, device="cuda") for _ in range(500)]:
    optimizer.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    optimizer.step()
dist.destroy_process_group()
