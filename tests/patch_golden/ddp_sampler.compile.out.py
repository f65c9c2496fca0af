import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).cuda()
model = DDP(model, device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
dataset = TensorDataset(torch.randn(4096, 64), torch.randint(0, 10, (4096,)))
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=32, sampler=sampler, drop_last=True)
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in loader:
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(_cg_compiled_model(x), y)
        loss.backward()
        optimizer.step()
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: loss {loss.item():.4f}")
dist.destroy_process_group()
