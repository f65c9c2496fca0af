"""A training loop annotated the way users annotate their own scripts with NVTX, profiled with a
plain `nsys profile` (no cg-advise bootstrap): the exports that `cg-advise analyze` meets from
other people. Which ranges repeat decides what the analyser may take as iterations:

    --ranges step     one range a training step ("train_step N"): the iterations
    --ranges epoch    one range an epoch of --steps-per-epoch steps: several iterations each
    --ranges phases   "forward", "backward", "optimizer" a step, side by side, no step range
    --ranges ops      torch.autograd.profiler.emit_nvtx(): one range a PyTorch operator
    --ranges none     no NVTX at all
    --ranges epoch+step   both, a step's range inside its epoch's
    --hand-update     no optimizer: each parameter moved by hand (p.add_(p.grad, alpha=-lr))

    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=graph -o OUT \\
        python3 bench/workloads/user_nvtx.py --ranges epoch
"""

import argparse
import contextlib

import torch
from torch import nn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranges", choices=("step", "epoch", "phases", "ops", "none", "epoch+step"), default="step")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps-per-epoch", type=int, default=40)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--hand-update", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    layers = []
    for _ in range(args.depth):
        layers += [nn.Linear(args.width, args.width), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(args.width, 10)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    batches = [(torch.randn(64, args.width, device="cuda"), torch.randint(0, 10, (64,), device="cuda"))
               for _ in range(8)]
    nvtx = torch.cuda.nvtx
    marks = set(args.ranges.split("+"))

    def ranged(name):
        return nvtx.range(name) if "phases" in marks else contextlib.nullcontext()

    emit = torch.autograd.profiler.emit_nvtx() if "ops" in marks else contextlib.nullcontext()
    step = 0
    with emit:
        for epoch in range(args.epochs):
            if "epoch" in marks:
                nvtx.range_push(f"epoch {epoch}")
            for _ in range(args.steps_per_epoch):
                if "step" in marks:
                    nvtx.range_push(f"train_step {step}")
                x, y = batches[step % len(batches)]
                optimizer.zero_grad(set_to_none=True)
                with ranged("forward"):
                    loss = criterion(model(x), y)
                with ranged("backward"):
                    loss.backward()
                with ranged("optimizer"):
                    if args.hand_update:
                        with torch.no_grad():
                            for p in model.parameters():
                                p.add_(p.grad, alpha=-1e-3)
                    else:
                        optimizer.step()
                if "step" in marks:
                    nvtx.range_pop()
                step += 1
            if "epoch" in marks:
                nvtx.range_pop()
            print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
