"""How long does the host work between iterations take beside a CUDA graph, against eager?

The benefit model keeps the host work between iterations (the DataLoader's next batch, the
copy to the GPU, logging) eager beside a full-iteration graph, at the time the eager profile
measured. On the H100 the graphed step of DataLoader loops ran faster than that host work
alone had taken in eager (an MLP fed by a pinned DataLoader: 0.86 ms between iterations
eager, 0.33 ms the whole graphed step). This times the same DataLoader loop both ways, in one
process, alternating: the wall and thread CPU time of fetching each batch, and ms/iteration.

Usage (GPU): python bench/host_beside_graph_probe.py OUT.json
(bench/results/host_speed_h100/host_beside_graph.json was taken with the warm-up steps run on
fixed batches before the loop; here they are the loop's first steps, otherwise the same. The
"MLP" is one Linear(256, 256) module called eight times, as it was measured: its GPU work is
that of eight layers, its parameters those of one.)
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ROUNDS = 3
STEPS = 160
WARMUP = 3   # steps before the capture (graphed runs)


def model_and_data(kind: str):
    torch.manual_seed(0)
    if kind == "mlp_pinned":
        layers = [nn.Linear(256, 256), nn.ReLU()] * 8
        model = nn.Sequential(*layers, nn.Linear(256, 10)).cuda()
        data = TensorDataset(torch.randn(64 * 8, 256), torch.randint(0, 10, (64 * 8,)))
        loader = DataLoader(data, batch_size=64, shuffle=True, pin_memory=True, drop_last=True)
    else:   # mnist-like: pageable batches of 32 images, a small CNN
        model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(),
                              nn.Linear(128, 10)).cuda()
        data = TensorDataset(torch.randn(32 * 40, 1, 28, 28), torch.randint(0, 10, (32 * 40,)))
        loader = DataLoader(data, batch_size=32, drop_last=True)
    return model, loader


def batches(loader, steps, fetch_wall, fetch_cpu):
    """The loader's batches, epoch after epoch, timing each fetch (wall and thread CPU)."""
    done = 0
    while True:
        iterator = iter(loader)
        while True:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                batch = next(iterator)
            except StopIteration:
                break
            fetch_wall.append((time.perf_counter() - wall) * 1e3)
            fetch_cpu.append((time.thread_time() - cpu) * 1e3)
            yield batch
            done += 1
            if done == steps:
                return


def run(kind: str, graphed: bool) -> dict:
    model, loader = model_and_data(kind)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x0, y0 = next(iter(loader))
    static_x, static_y = x0.cuda(), y0.cuda()

    def step(x, y):
        optimizer.zero_grad(set_to_none=False)   # the captured backward writes into these gradients
        loss_fn(model(x), y).backward()
        optimizer.step()

    graph, side = None, torch.cuda.Stream()
    fetch_wall, fetch_cpu, marks = [], [], []
    for i, (x, y) in enumerate(batches(loader, STEPS, fetch_wall, fetch_cpu)):
        if graphed and i < WARMUP:   # the first steps on a side stream, as torch.cuda.graph asks
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                step(x.cuda(), y.cuda())
            torch.cuda.current_stream().wait_stream(side)
            continue
        if graphed and graph is None:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step(static_x, static_y)
        if graph is not None:
            static_x.copy_(x, non_blocking=True)
            static_y.copy_(y, non_blocking=True)
            graph.replay()
        else:
            step(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
        if i >= 40 and i % 20 == 0:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            marks.append(event)
    torch.cuda.synchronize()
    per_iter = [a.elapsed_time(b) / 20 for a, b in zip(marks, marks[1:])]
    return {"ms_per_iteration": statistics.median(per_iter),
            "fetch_wall_ms": statistics.median(fetch_wall[40:]),
            "fetch_cpu_ms": statistics.median(fetch_cpu[40:])}


def main() -> int:
    results = []
    for kind in ("mlp_pinned", "mnist_pageable"):
        for round_ in range(ROUNDS):
            for graphed in (False, True):
                row = {"kind": kind, "graphed": graphed, "round": round_, **run(kind, graphed)}
                print(json.dumps(row), flush=True)
                results.append(row)
    with open(sys.argv[1], "w") as handle:
        json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
