"""Overhead of the injected NVTX hooks on unprofiled iteration time, measured side by side.

Runs the example workload alternately plain and under ``python -m advisor.inject`` (no
profiler attached), ROUNDS times each, and prints the median ms/iteration of both and their
ratio. Needs a CUDA GPU. Target: ratio <= 1.02.

    python bench/nvtx_overhead.py [--rounds 5] [workload args...]
"""

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

WORKLOAD = Path(__file__).parent / "workloads" / "train_mlp.py"


def ms_per_iter(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"ms_per_iter=([0-9.]+)", out).group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args, workload_args = parser.parse_known_args()
    workload_args = workload_args or ["--width", "256", "--depth", "16", "--batch", "64"]
    base = [str(WORKLOAD), *workload_args, "--steps", "500", "--time"]
    plain, hooked = [], []
    for i in range(args.rounds):  # ABBA order, so drift hits both alike
        order = (False, True) if i % 2 == 0 else (True, False)
        for with_hooks in order:
            command = [sys.executable, "-m", "advisor.inject", *base] if with_hooks else [sys.executable, *base]
            (hooked if with_hooks else plain).append(ms_per_iter(command))
    p, h = statistics.median(plain), statistics.median(hooked)
    print(f"plain   ms/iter median {p:.4f} min {min(plain):.4f}  {plain}")
    print(f"hooked  ms/iter median {h:.4f} min {min(hooked):.4f}  {hooked}")
    print(f"overhead ratio hooked/plain: median {h / p:.4f}, min {min(hooked) / min(plain):.4f}")


if __name__ == "__main__":
    main()
