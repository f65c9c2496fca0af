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
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for x in [torch.randn(32, 64, device="cuda") for _ in range(500)]:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    loss = _cg_compiled_model(x).square().mean()
    loss.backward()
    optimizer.step()
dist.destroy_process_group()
