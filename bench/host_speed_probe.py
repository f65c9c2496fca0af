"""Does the eager launch cost depend on which CPU the launching thread runs on?

The lent H100 host reads two speeds of eager launch (about 7.4 and 10.5 us per op) from one
calibration round to the next, and the profile's and tune's eager timings of one script differ
by up to 30 %. If the speed follows the core (a NUMA node far from the GPU, a core shared with
another tenant), pinning the script makes profile and tune measure the same machine.

`cores`: pins the calling thread to each allowed CPU in turn, PASSES times, and prints the
median launch cost per CPU and pass, then the same unpinned. `series`: the launch cost of every
batch of BATCH_OPS ops for SERIES_S seconds, with its time, to see how long each speed lasts.
Usage (GPU): python bench/host_speed_probe.py cores|series OUT.json
"""

from __future__ import annotations

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


def main() -> int:
    import torch

    mode, out = sys.argv[1], sys.argv[2]
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
