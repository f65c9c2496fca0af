"""Does the eager launch cost depend on which CPU the launching thread runs on, or on when?

The lent H100 host reads two speeds of eager launch (about 7.2 and 10.2 us per op) from one
calibration round to the next, and the profile's and tune's eager timings of one script differ
by up to 30 %. Had the speed followed the core (a NUMA node far from the GPU, a core shared
with another tenant), pinning the script would make profile and tune measure the same machine;
it does not (bench/results/host_speed_h100/per_cpu*.json: every core reads both speeds), and
the series shows how the mix drifts over seconds.

`cores`: pins the calling thread to each allowed CPU in turn, PASSES times, and prints the
median launch cost per CPU and pass, then the same unpinned. `series`: the launch cost of every
batch of BATCH_OPS ops for SERIES_S seconds, with its time, to see how long each speed lasts.
`summary`: how far apart windows of 0.1-5 s of such a series are (no GPU needed).
Usage: python bench/host_speed_probe.py cores|series OUT.json (GPU), summary SERIES.json[.gz]
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import sys
import time

PASSES = 3
OPS = 400
BATCHES = 9
BATCH_OPS = 100
SERIES_S = 20.0
FAST_US = 8.8   # between the two speeds seen (about 7.2 and 10.2 us per launch)


def launch_cost_us(torch, x) -> float:
    costs = []
    for _ in range(BATCHES):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(OPS):
            x.add_(1.0)
        costs.append((time.perf_counter() - start) / OPS * 1e6)
    torch.cuda.synchronize()
    return statistics.median(costs)


def series(torch, x) -> list:
    """(seconds since start, us per op) for each batch of BATCH_OPS launches."""
    points = []
    begin = time.perf_counter()
    while time.perf_counter() - begin < SERIES_S:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(BATCH_OPS):
            x.add_(1.0)
        points.append((round(start - begin, 4), round((time.perf_counter() - start) / BATCH_OPS * 1e6, 2)))
    return points


def summarise(path: str) -> None:
    """The share of batches at the fast speed, and the slowest over the fastest window mean."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:
        points = json.load(handle)
    costs = [cost for _, cost in points]
    print(f"{path}: {len(points)} batches of {BATCH_OPS} launches, median {statistics.median(costs):.2f} us per "
          f"launch, {sum(c < FAST_US for c in costs) / len(costs):.0%} of them under {FAST_US} us")
    for seconds in (0.1, 0.5, 2.0, 5.0):
        windows = {}
        for t, cost in points:
            windows.setdefault(int(t / seconds), []).append(cost)
        means = [statistics.mean(v) for _, v in sorted(windows.items())][:-1]   # the last one is partial
        print(f"  windows of {seconds:>3} s: {min(means):.2f}-{max(means):.2f} us, {max(means) / min(means):.2f}x apart")


def main() -> int:
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "summary":
        summarise(out)
        return 0
    import torch

    x = torch.zeros(1, device="cuda")
    for _ in range(5):
        launch_cost_us(torch, x)
    if mode == "series":
        with open(out, "w") as f:
            json.dump(series(torch, x), f)
        return 0
    allowed = sorted(os.sched_getaffinity(0))
    rows = {cpu: [] for cpu in allowed}
    unpinned = []
    for _ in range(PASSES):
        for cpu in allowed:
            os.sched_setaffinity(0, {cpu})
            launch_cost_us(torch, x)                  # settle on the new core
            rows[cpu].append(round(launch_cost_us(torch, x), 2))
        os.sched_setaffinity(0, allowed)
        for _ in range(4):
            unpinned.append(round(launch_cost_us(torch, x), 2))
            time.sleep(0.1)
    for cpu, costs in rows.items():
        print(f"cpu {cpu:3d}: {costs}")
    print(f"unpinned: {unpinned}")
    with open(out, "w") as f:
        json.dump({"per_cpu": rows, "unpinned": unpinned}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
