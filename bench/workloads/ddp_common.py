"""What the DDP workloads (ddp_train.py, ddp_accumulate.py) share: the process group, the
models and the data, so that the two training loops differ only in their step. Each script
still builds its DDP model, optimizer and loss itself, before its own epoch loop, as a user's
script does: patch reads them there. Built by a helper here, the model is no DDP to patch (its
rewrites lose the side stream DDP must be built under, full_iteration_allreduce_outside is
refused), so those lines repeat."""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, TensorDataset


def arguments(accumulate: int = 1):
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=("mlp", "transformer"), default="mlp")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per rank (two epochs)")
    parser.add_argument("--accumulate", type=int, default=accumulate, help="micro-batches per optimizer step")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--width", type=int, default=256)
    return parser.parse_args()


def setup() -> torch.device:
    """NCCL on GPUs, gloo on the CPU; this rank's device."""
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    if not cuda:
        return torch.device("cpu")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    return device


def build(kind: str, width: int) -> tuple:
    """(model, shape of one sample): dropout off, so that a graph's parameters can be compared
    with eager's. The MLP is launch-bound (small matrices, many layers)."""
    torch.manual_seed(0)
    if kind == "mlp":
        layers = [m for _ in range(8) for m in (nn.Linear(width, width), nn.ReLU())]
        return nn.Sequential(*layers, nn.Linear(width, width)), (width,)
    layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=4 * width, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False), (32, width)


def loader(args, shape) -> tuple:
    """(DistributedSampler, DataLoader): two epochs of args.steps optimizer steps in all; whole
    batches indexed at once, so that the host cost is one gather, not one per sample."""
    samples = dist.get_world_size() * args.batch * args.accumulate * (args.steps // 2)
    generator = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(samples, *shape, generator=generator),
                         torch.randn(samples, *shape, generator=generator))
    sampler = DistributedSampler(data, seed=0, drop_last=True)
    return sampler, DataLoader(data, sampler=BatchSampler(sampler, args.batch, drop_last=True), batch_size=None)


def report(model, loss) -> None:
    """Each rank's last loss and parameter checksum: the patched script must print the same."""
    checksum = sum(float(p.detach().double().abs().sum()) for p in model.parameters())
    # one write per line: the ranks share the terminal
    sys.stdout.write(f"rank {dist.get_rank()}: last loss {loss.item():.6f} parameter checksum {checksum:.6f}\n")
    sys.stdout.flush()
    dist.destroy_process_group()
