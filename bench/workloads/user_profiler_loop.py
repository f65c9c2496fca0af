"""A training loop profiled the way torch.profiler's documentation shows, not by cg-advise:
a schedule (wait, warm-up, active), ``prof.step()`` after each step, which writes a
``ProfilerStep#N`` range around it, and ``tensorboard_trace_handler`` writing a gzipped
Chrome trace. ``cg-advise analyze`` must read such a trace as it reads its own.

    python bench/workloads/user_profiler_loop.py OUT_DIR [--graphed] [--detail plain|full|none] [--steps N]

``--detail full`` adds what HolisticTraceAnalysis users record (shapes, memory, stacks);
``none`` runs the same loop without the profiler (to profile it with cg-advise instead);
``--graphed`` replays the whole step as one CUDA graph (torch.cuda.graph).
"""

import argparse

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

WAIT, WARMUP, ACTIVE = 10, 5, 10


def build():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 16)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(64, 256, device="cuda", generator=generator)
    y = torch.randn(64, 16, device="cuda", generator=generator)
    return model, optimizer, x, y


def train_step(model, optimizer, x, y):
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def graphed_step(model, optimizer, x, y):
    """The whole step captured once (warm-up on a side stream first, as PyTorch's docs do)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            train_step(model, optimizer, x, y)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = train_step(model, optimizer, x, y)

    def replay(*_):
        graph.replay()
        return loss
    return replay


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--graphed", action="store_true")
    parser.add_argument("--detail", choices=("plain", "full", "none"), default="plain")
    parser.add_argument("--steps", type=int, default=0, help="steps in all (at least the schedule's and 5)")
    args = parser.parse_args()
    model, optimizer, x, y = build()
    step = graphed_step(model, optimizer, x, y) if args.graphed else train_step
    steps = max(args.steps, WAIT + WARMUP + ACTIVE + 5)
    if args.detail == "none":
        for _ in range(steps):
            loss = step(model, optimizer, x, y)
    else:
        full = args.detail == "full"
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                     schedule=schedule(wait=WAIT, warmup=WARMUP, active=ACTIVE, repeat=1),
                     on_trace_ready=tensorboard_trace_handler(args.out, worker_name="worker0", use_gzip=True),
                     record_shapes=full, profile_memory=full, with_stack=full) as prof:
            for _ in range(steps):
                loss = step(model, optimizer, x, y)
                prof.step()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
