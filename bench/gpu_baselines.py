"""Does an attached profiler slow the untraced warm-up? The bootstrap's untraced baseline of the
same workload, in fresh processes, alternating: with no profiler at all, under torch.profiler
(the torch backend: no profiler runs until the window opens) and under Nsight Systems with a
cudaProfilerApi capture range (nsys attached from the start, collecting only in the window).

    python bench/gpu_baselines.py OUT.json [--rounds 3] [--only NAME ...]   (nsys on PATH)

Prints, per workload and mode, the median over rounds of the untraced ms/iteration (CUDA
events, the median of the timed warm-up iterations), and each mode over "none".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
M = "bench/workloads/train_mlp.py"
Z = "bench/workloads/zoo_scripts"
WORKLOADS = {   # as bench/gpu_backends.sh runs them
    "mlp_launch": [M, "--steps", "100"],
    "mlp_sync": [M, "--sync", "--steps", "100"],
    "mlp_infer": [M, "--inference", "--steps", "100"],
    "cnn_amp": [f"{Z}/zoo_amp.py", "cnn_c16_k4_b32_s32", "--steps", "100"],
    "gpt_small": [f"{Z}/zoo_plain.py", "gpt_d128_l2_b8_t64", "--steps", "100"],
}
MODES = ("none", "torch", "nsys")


def one_run(mode: str, args: list, folder: Path) -> float | None:
    summary = folder / "summary.json"
    summary.unlink(missing_ok=True)
    env = {**os.environ, "CG_ADVISE_WARMUP": "50", "CG_ADVISE_ITERATIONS": "20", "CG_ADVISE_RUN_TO_END": "0",
           "CG_ADVISE_SUMMARY": str(summary)}
    command = [sys.executable, "-m", "advisor.inject", *args]
    if mode == "torch":
        env["CG_ADVISE_KINETO_TRACE"] = str(folder / "t.json.gz")
    elif mode == "nsys":
        command = ["nsys", "profile", "-t", "cuda,nvtx", "--cuda-graph-trace=graph", "-s", "none", "--cpuctxsw=none",
                   "--capture-range=cudaProfilerApi", "--capture-range-end=stop", "-o", str(folder / "r"),
                   "--force-overwrite", "true", *command]
    result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    try:
        return json.loads(summary.read_text())["untraced"]["gpu_ms_per_iteration"]
    except (OSError, ValueError, KeyError):
        print(f"{mode} {args}: no baseline (exit {result.returncode}): {result.stderr[-300:]}", file=sys.stderr)
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS))
    args = parser.parse_args()
    results = {name: {mode: [] for mode in MODES} for name in args.only}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name in args.only:
                order = MODES[round_ % 3:] + MODES[:round_ % 3]   # each mode first once
                for mode in order:
                    value = one_run(mode, WORKLOADS[name], Path(tmp))
                    if value is not None:
                        results[name][mode].append(value)
                    print(f"round {round_} {name} {mode}: {value}", file=sys.stderr, flush=True)
                args.output.write_text(json.dumps(results, indent=1) + "\n")
    print("| workload | " + " | ".join(f"{m} ms" for m in MODES) + " | torch/none | nsys/none |")
    print("| --- |" + " --- |" * (len(MODES) + 2))
    for name, modes in results.items():
        med = {m: statistics.median(v) if v else None for m, v in modes.items()}
        ratios = [f"{med[m] / med['none']:.3f}" if med[m] and med["none"] else "-" for m in ("torch", "nsys")]
        print(f"| {name} | " + " | ".join(f"{med[m]:.3f}" if med[m] else "-" for m in MODES)
              + f" | {ratios[0]} | {ratios[1]} |")


if __name__ == "__main__":
    main()
