import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = FSDP(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256)).cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for x in [torch.randn(32, 256, device="cuda") for _ in range(300)]:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    loss = _cg_compiled_model(x).square().mean()
    loss.backward()
    optimizer.step()
dist.destroy_process_group()
