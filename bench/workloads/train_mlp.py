"""A parametrised MLP training (or inference) loop: the example workload of cg-advise.

Small and deep is launch-bound, wide is compute-bound; ``--graph full`` captures the whole
iteration (forward, backward, capturable Adam) in one CUDA graph; ``--sync`` reads the loss
with ``.item()`` every step; ``--inference`` runs forward only under ``torch.no_grad``.
``--time`` prints the median ms per iteration measured with CUDA events.
"""

import argparse
import os
import statistics

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int, depth: int, big: int):
        super().__init__()
        self.stem = nn.Linear(width, width)
        self.body = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])
        self.wide = nn.Sequential(nn.Linear(width, big), nn.ReLU(), nn.Linear(big, width)) if big else nn.Identity()
        self.head = nn.Linear(width, 16)

    def forward(self, x):
        return self.head(self.wide(self.body(self.stem(x))))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--big", type=int, default=0, help="width of an extra wide block (0: none)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--graph", choices=["none", "full"], default="none")
    p.add_argument("--sync", action="store_true", help="loss.item() every step")
    p.add_argument("--inference", action="store_true")
    p.add_argument("--nvtx-step", action="store_true", help="wrap each step in the script's own NVTX range")
    p.add_argument("--crash-after", type=int, default=0, help="raise after this many steps (tests failure handling)")
    p.add_argument("--time", action="store_true", help="print median ms/iteration (CUDA events)")
    return p.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    dev = "cuda"
    model = Net(args.width, args.depth, args.big).to(dev)
    if "LOCAL_RANK" in os.environ:  # under torchrun: DDP (gloo when ranks share a GPU)
        rank = int(os.environ["LOCAL_RANK"])
        dev = f"cuda:{rank % torch.cuda.device_count()}"
        torch.cuda.set_device(dev)
        shared = int(os.environ["WORLD_SIZE"]) > torch.cuda.device_count()
        torch.distributed.init_process_group("gloo" if shared else "nccl")
        model = torch.nn.parallel.DistributedDataParallel(model.to(dev))
    loss_fn = nn.MSELoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, capturable=args.graph == "full")
    xs = [torch.randn(args.batch, args.width, device=dev) for _ in range(4)]
    ys = [torch.randn(args.batch, 16, device=dev) for _ in range(4)]

    def eager_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if args.inference:
        model.eval()

        def step(i):
            with torch.no_grad():
                return model(xs[i % 4]).sum()
    elif args.graph == "full":
        static_x, static_y = xs[0].clone(), ys[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                eager_step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = loss_fn(model(static_x), static_y)
            static_loss.backward()
            opt.step()

        def step(i):
            static_x.copy_(xs[i % 4])
            static_y.copy_(ys[i % 4])
            graph.replay()
            return static_loss
    else:
        def step(i):
            return eager_step(xs[i % 4], ys[i % 4])

    events = [torch.cuda.Event(enable_timing=True) for _ in range(args.steps + 1)]
    for i in range(args.steps):
        events[i].record()
        if args.nvtx_step:
            torch.cuda.nvtx.range_push("train_step")
        loss = step(i)
        if args.crash_after and i + 1 == args.crash_after:
            raise RuntimeError(f"crashing on purpose after {i + 1} steps")
        if args.sync:
            loss.item()
        if args.nvtx_step:
            torch.cuda.nvtx.range_pop()
    events[-1].record()
    torch.cuda.synchronize()
    if args.time:
        times = [events[i].elapsed_time(events[i + 1]) for i in range(args.steps)]
        warm = times[min(10, args.steps // 2):]
        print(f"ms_per_iter={statistics.median(warm):.4f}")


if __name__ == "__main__":
    main()
