"""What do host reads after a whole-step graph cost? The DCGAN loop's rewrite moves its three
`output.mean().item()` reads (and `errD = errD_real + errD_fake`) from inside the step to after
the replay; predicted 0.504-0.534 ms an iteration graphed on the H100, measured 0.676-0.718.

This times, in one process and alternating, the DCGAN's step captured by the full-iteration
helper (tuner/templates.py) followed by: nothing; the three reads as the rewrite runs them
(`x.mean().item()`, and the add); three bare `.item()` reads of tensors the graph wrote; and,
apart, a single read's round trip on an idle GPU (`y.item()`, `y.mean().item()`) and one
eager launch (`y.add_(1)`), so that the difference can be set against what the calibration
can measure.

Usage (GPU): python bench/host_read_probe.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
from torch import nn

from advisor.calibrate import helper_overhead, typical

ROUNDS = 5
STEPS = 400


def gan(device):
    torch.manual_seed(0)
    nz = 16
    net_g = nn.Sequential(nn.Linear(nz, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 32), nn.Tanh()).to(device)
    net_d = nn.Sequential(nn.Linear(32, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1), nn.Sigmoid()).to(device)
    criterion = nn.BCELoss()
    opt_d = torch.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999), capturable=True)
    opt_g = torch.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999), capturable=True)

    def step(b_size, noise, real):
        label = torch.full((b_size,), 1.0, dtype=torch.float, device=device)
        output = net_d(real).view(-1)
        err_real = criterion(output, label)
        err_real.backward()
        out1 = output
        fake = net_g(noise)
        label.fill_(0.0)
        output = net_d(fake.detach()).view(-1)
        err_fake = criterion(output, label)
        err_fake.backward()
        out2 = output
        opt_d.step()
        net_g.zero_grad()
        label.fill_(1.0)
        output = net_d(fake).view(-1)
        err_g = criterion(output, label)
        err_g.backward()
        opt_g.step()
        return out1, out2, err_fake, err_real, err_g, output

    return step, (opt_d, opt_g), (net_d, net_g), nz


def helper_inputs(device) -> dict:
    """The helper's host cost per call beyond its replay, with 2, 4 and 6 input tensors (a
    recurrent loop's carried hidden state adds two), timed as the calibration times it with 2:
    the median round, us."""
    return {count: typical(helper_overhead(torch, device, count)) for count in (2, 4, 6)}


def main() -> None:
    from tuner.templates import FULL_ITERATION

    device = torch.device("cuda")
    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    step, optimizers, models, nz = gan(device)
    helper = namespace["_CgFullIterationGraph"](step, list(optimizers), list(models))
    data = [torch.randn(32, 32) for _ in range(16)]
    noise = [torch.randn(32, nz, device=device) for _ in range(16)]

    def reads(outputs):
        out1, out2, err_fake, err_real, err_g, output = outputs
        a = out1.mean().item()
        b = out2.mean().item()
        _ = err_real + err_fake
        c = output.mean().item()
        return a, b, c

    def bare(outputs):
        out1, out2, err_fake, err_real, err_g, output = outputs
        return err_fake.item(), err_real.item(), err_g.item()

    variants = {"none": lambda o: None, "mean_item_x3_and_add": reads, "item_x3": bare}

    def run(variant, steps=STEPS):
        after = variants[variant]
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i in range(steps):
            real = data[i % 16].to(device)
            after(helper(real.size(0), noise[i % 16], real))
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / steps * 1e3

    for variant in variants:
        run(variant, 20)       # captures on the first call, then warm
    ms = {v: [] for v in variants}
    for _ in range(ROUNDS):
        for variant in variants:
            ms[variant].append(run(variant))

    y = torch.ones(1, device=device)
    singles = {"item": lambda: y.item(), "mean_item": lambda: y.mean().item(), "add_launch": lambda: y.add_(1)}
    single_us = {k: [] for k in singles}
    for _ in range(ROUNDS):
        for key, call in singles.items():
            for _ in range(20):
                call()
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(200):
                call()
            single_us[key].append((time.perf_counter() - start) / 200 * 1e6)
            torch.cuda.synchronize()
    out_inputs = helper_inputs(device)
    out = {"helper_beyond_replay_us_by_inputs": out_inputs, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "steps": STEPS,
           "ms_per_iteration": ms, "median_ms": {k: statistics.median(v) for k, v in ms.items()},
           "single_us": single_us, "single_median_us": {k: statistics.median(v) for k, v in single_us.items()}}
    out["reads_cost_ms"] = out["median_ms"]["mean_item_x3_and_add"] - out["median_ms"]["none"]
    out["bare_reads_cost_ms"] = out["median_ms"]["item_x3"] - out["median_ms"]["none"]
    text = json.dumps(out, indent=1)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
