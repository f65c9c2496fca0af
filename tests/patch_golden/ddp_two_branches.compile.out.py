"""DDP built in one of two branches inside main(): with its GPU options on a GPU, plain on
the CPU (gloo). Both constructions bind the loop's model, so both must be built under a side
stream: the branch that runs on a GPU is the first one, not the last in the file."""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    if device.type == "cuda":
        model = DDP(net, device_ids=[device.index], gradient_as_bucket_view=True)
    else:
        model = DDP(net)
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


if __name__ == "__main__":
    main()
