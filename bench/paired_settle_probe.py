"""After a switch from eager steps to graph replays, how many replays run slow?

Tune's paired timing alternates windows of 10 graphed and 10 eager steps in one process. On
the lent H100 its graphed windows read 1.13-1.58x the ms/iteration of the same rewrite timed
with no eager windows between (bench/paired_vs_continuous.sh; windows of 200 steps 1.01x), while
the GPU's clock stayed at its maximum (nvidia-smi, every 100 ms). This times each step of a
graphed stretch that follows an eager one, by its position after the switch, with a CUDA event
per step, for two steps captured by the full-iteration helper (tuner/templates.py): the DCGAN's
(three host reads a step) and a small MLP's (none); and the same positions with no eager steps
before (replays throughout).

Usage (GPU): python bench/paired_settle_probe.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
from torch import nn

from host_read_probe import gan

CYCLES = 30
EAGER = 20      # eager steps before each graphed stretch
GRAPHED = 60    # graphed steps timed after each switch


def mlp(device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    y = torch.randn(64, 1, device=device)

    def step(x):
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step, [optimizer], [model], [torch.randn(64, 12, device=device)]


def profile(helper, call_inputs, switch: bool) -> list:
    """Per position after the switch: the median ms of that step over the cycles."""
    per_position = [[] for _ in range(GRAPHED)]
    for _ in range(CYCLES):
        if switch:
            for _ in range(EAGER):
                helper._zero_grad()
                helper.step(*call_inputs())
        torch.cuda.synchronize()
        events = [torch.cuda.Event(enable_timing=True) for _ in range(GRAPHED + 1)]
        events[0].record()
        for k in range(GRAPHED):
            outputs = helper(*call_inputs())
            if isinstance(outputs, tuple):          # the DCGAN's reads, as its rewrite runs them
                outputs[0].mean().item()
                outputs[1].mean().item()
                outputs[5].mean().item()
            events[k + 1].record()
        torch.cuda.synchronize()
        for k in range(GRAPHED):
            per_position[k].append(events[k].elapsed_time(events[k + 1]))
    return [statistics.median(v) for v in per_position]


def main() -> None:
    from tuner.templates import FULL_ITERATION

    device = torch.device("cuda")
    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    helper_class = namespace["_CgFullIterationGraph"]
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cycles": CYCLES,
           "eager_steps_before": EAGER, "ms_by_position": {}}

    step, optimizers, models, nz = gan(device)
    real = torch.randn(32, 32)
    noise = torch.randn(32, nz, device=device)
    steps = {"dcgan": (helper_class(step, list(optimizers), list(models)),
                       lambda: (32, noise, real.to(device)))}
    step, optimizers, models, inputs = mlp(device)
    steps["small_mlp"] = (helper_class(step, optimizers, models), lambda: tuple(inputs))
    for name, (helper, call_inputs) in steps.items():
        for _ in range(5):
            helper(*call_inputs())   # the capture, then replays
        for switch in (True, False, True, False):   # twice each, by turns
            key = f"{name}_{'after_eager' if switch else 'replays_only'}"
            found = profile(helper, call_inputs, switch)
            out["ms_by_position"].setdefault(key, []).append(found)
    summary = {}
    for key, runs in out["ms_by_position"].items():
        merged = [statistics.median(values) for values in zip(*runs)]
        summary[key] = {"first_5": [round(v, 4) for v in merged[:5]], "steps_6_to_20": round(statistics.median(merged[5:20]), 4),
                        "steps_21_to_60": round(statistics.median(merged[20:]), 4),
                        "mean_1_to_10": round(statistics.mean(merged[:10]), 4)}
    out["summary"] = summary
    print(json.dumps(summary, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as handle:
            json.dump(out, handle, indent=1)


if __name__ == "__main__":
    main()
