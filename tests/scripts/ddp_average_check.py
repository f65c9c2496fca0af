"""Under torchrun (gloo): the full_iteration_allreduce_outside helper's gradient average against
DDP's own. Each rank runs one backward under no_sync() and averages with the helper, then the
same backward through DDP's all-reduce; prints the largest difference, one line per rank."""
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from tuner.templates import FULL_ITERATION

namespace = {"torch": torch}
exec(FULL_ITERATION, namespace)
dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
helper = namespace["_CgFullIterationGraph"](lambda x: None, [optimizer], [model], allreduce=model)
x = torch.randn(32, 8, generator=torch.Generator().manual_seed(dist.get_rank()))   # each rank its own batch
with model.no_sync():
    model(x).square().mean().backward()
local = [p.grad.clone() for p in model.parameters()]
helper._average_gradients()
ours = [p.grad.clone() for p in model.parameters()]
optimizer.zero_grad()
model(x).square().mean().backward()   # DDP all-reduces: the mean over the ranks
theirs = [p.grad for p in model.parameters()]
moved = max(float((a - b).abs().max()) for a, b in zip(local, theirs))
print(f"rank {dist.get_rank()}: difference {max(float((a - b).abs().max()) for a, b in zip(ours, theirs)):.3e} "
      f"local {moved:.3e}", flush=True)
dist.destroy_process_group()
