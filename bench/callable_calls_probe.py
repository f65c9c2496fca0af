"""What a graphed callable's host cost grows with: the distinct callables one backward pass runs
through, or the backward passes (#12, fwd_bwd).

The model fits the graphed callables' host cost per iteration on loops of one model called once
and charges it again for every graphed call of an iteration. Two shapes make several calls:
micro-steps (one model, k forward and backward passes) and a step that runs several graphed
models into one loss (an encoder and two heads, one backward). This probe times both on the GPU,
host-bound tiny MLPs, eager against `torch.cuda.make_graphed_callables`, and prints each shape's
graphed minus eager ms per iteration, so the increment of a second, third and fourth call can be
read for either shape.

Usage (GPU): python bench/callable_calls_probe.py [--steps 400] [--json OUT.json]
"""
import argparse
import json
import statistics
import time

import torch
from torch import nn


def mlp(width: int = 32) -> nn.Module:
    return nn.Sequential(nn.Linear(width, width), nn.ReLU()).cuda()


def timed(step, steps: int) -> float:
    """Median ms per iteration over five windows of ``steps`` // 5 iterations, after a warm-up."""
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    windows = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(steps // 5):
            step()
        torch.cuda.synchronize()
        windows.append((time.perf_counter() - start) * 1e3 / (steps // 5))
    return statistics.median(windows)


def distinct_models(n: int, graphed: bool, steps: int) -> float:
    """n models chained into one loss, one backward an iteration."""
    models = [mlp() for _ in range(n)]
    x = torch.randn(16, 32, device="cuda")
    if graphed:
        samples = [torch.randn(16, 32, device="cuda", requires_grad=i > 0) for i in range(n)]
        models = list(torch.cuda.make_graphed_callables(tuple(models), tuple((s,) for s in samples)))
    params = [p for m in models for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=1e-3)

    def step():
        h = x
        for m in models:
            h = m(h)
        loss = h.square().mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        opt.step()
    return timed(step, steps)


def micro_steps(k: int, graphed: bool, steps: int) -> float:
    """One model called k times an iteration, each call its own backward (gradient accumulation)."""
    model = mlp()
    x = torch.randn(16, 32, device="cuda")
    if graphed:
        model = torch.cuda.make_graphed_callables(model, (torch.randn(16, 32, device="cuda"),))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=False)
        for _ in range(k):
            model(x).square().mean().backward()
        opt.step()
    return timed(step, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "shapes": {}}
    for shape, run in (("distinct models, one backward", distinct_models), ("one model, k backward passes", micro_steps)):
        rows = []
        for n in (1, 2, 3, 4):
            eager, graphed = run(n, False, args.steps), run(n, True, args.steps)
            rows.append({"calls": n, "eager_ms": eager, "graphed_ms": graphed, "extra_ms": graphed - eager})
            print(f"{shape}: {n} calls, eager {eager:.3f} ms, graphed {graphed:.3f} ms, graphed - eager {graphed - eager:+.3f} ms")
        out["shapes"][shape] = rows
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
