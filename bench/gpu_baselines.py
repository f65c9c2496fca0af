"""Does an attached profiler slow the untraced warm-up that every prediction divides, and how
far apart do fresh processes of one script time it? The same workload in fresh processes,
one per mode and round:

- ``none``: the profile's bootstrap with its default window (50 warm-up iterations, the last
  25 timed: the untraced baseline) and no profiler;
- ``torch``: the same under the torch backend (no profiler runs until the window opens);
- ``nsys``: the same under ``nsys profile`` with cg-advise's own options (a cudaProfilerApi
  capture range: nsys attached from the start, collecting only in the window);
- ``gated``: the ``nsys`` mode with ``CG_ADVISE_RANGES=window``: the bootstrap emits its NVTX
  ranges only inside the recording window, so the untraced stretches pay no range;
- ``tune``: tune's harness timing the script eagerly (10 warm-up steps, 40 timed in 3
  windows, as bench/collect_dataset.py tunes): the measurement speedups divide by.

    python bench/gpu_baselines.py OUT.json [--rounds 3] [--modes none,torch,nsys]
        [--order rotate|fixed] [--only NAME ...]   (nsys on PATH for the nsys mode)

NAME: a workload of bench/gpu_backends.sh (below), of the zoo (bench/zoo.py), run as
``zoo_plain.py NAME --steps 200``, or a corpus loop (``tests/corpus/NAME.py``, its length
from ``CG_STEPS`` where it reads it). ``--order rotate`` (the default) starts each round
with another mode; ``fixed`` keeps the order given. Prints per workload each mode's
processes, the medians' ratios to ``none`` and to ``tune`` where those ran, and each mode's
spread between processes (max/min, standard deviation of the log); OUT.json keeps them all,
written after every run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor.nsys import NsysError, find_nsys  # noqa: E402
from advisor.profile import (NSYS, TORCH, ProfileOptions, Target, bootstrap_command,  # noqa: E402
                             child_env, nsys_command)
from tuner.harness import Settings  # noqa: E402
from tuner.runner import new_workdir, run_candidate  # noqa: E402
from zoo import ZOO  # noqa: E402

M = "bench/workloads/train_mlp.py"
Z = "bench/workloads/zoo_scripts"
WORKLOADS = {   # as bench/gpu_backends.sh runs them
    "mlp_launch": [M, "--steps", "100"],
    "mlp_sync": [M, "--sync", "--steps", "100"],
    "mlp_infer": [M, "--inference", "--steps", "100"],
    "cnn_amp": [f"{Z}/zoo_amp.py", "cnn_c16_k4_b32_s32", "--steps", "100"],
    "gpt_small": [f"{Z}/zoo_plain.py", "gpt_d128_l2_b8_t64", "--steps", "100"],
}
MODES = ("none", "torch", "nsys", "gated", "tune")
WARMUP, ITERATIONS = 50, 20   # profile's default window
PHASES = []   # each bootstrap run's untraced ms/iteration, whole and per phase (OUT.json's "phases")


def arguments(name: str) -> list:
    if name in WORKLOADS:
        return WORKLOADS[name]
    if name in ZOO:
        return [f"{Z}/zoo_plain.py", name, "--steps", "200"]
    if (ROOT / "tests" / "corpus" / f"{name}.py").exists():
        return [f"tests/corpus/{name}.py"]
    raise SystemExit(f"gpu_baselines: {name}: neither a workload of gpu_backends.sh nor of the zoo")


def bootstrap_baseline(mode: str, args: list, folder: Path, nsys) -> float | None:
    """The untraced ms/iteration the bootstrap timed in one process (CUDA events, median);
    ``nsys`` (found once, before the first run) for the nsys mode."""
    options = ProfileOptions(output=folder / "r", warmup=WARMUP, iterations=ITERATIONS, force=True,
                             backend=TORCH if mode == "torch" else NSYS)
    target = Target(sys.executable, [], list(args))
    summary = folder / "summary.json"
    summary.unlink(missing_ok=True)
    command = nsys_command(nsys, options, target) if mode in ("nsys", "gated") else bootstrap_command(target)
    env = child_env(options, summary, os.environ)
    if mode == "gated":
        env["CG_ADVISE_RANGES"] = "window"
    try:
        result = subprocess.run(command, env=env, cwd=ROOT, capture_output=True,
                                text=True, timeout=600)
    except subprocess.TimeoutExpired:
        print(f"{mode} {args}: over 600 s", file=sys.stderr)
        return None
    untraced = (json.loads(summary.read_text()).get("untraced") or {}) if summary.exists() else {}
    ms = untraced.get("gpu_ms_per_iteration") or untraced.get("host_ms_per_iteration")
    PHASES.append({"mode": mode, "args": args, **{k: v for k, v in untraced.items() if k.endswith("_per_iteration")}})
    if result.returncode or not ms:
        print(f"{mode} {args}: no baseline (exit {result.returncode}): {result.stderr[-300:]}", file=sys.stderr)
        return None
    return ms


def tune_eager(args: list) -> float | None:
    workdir = new_workdir()
    try:
        measured, _ = run_candidate(ROOT / args[0], args[1:], "eager", Settings(warmup=10, iterations=40, repeats=3),
                                    workdir, 600)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if measured.status != "ok":
        print(f"tune {args}: {measured.failure}", file=sys.stderr)
        return None
    return measured.ms_per_iter


def one_run(mode: str, args: list, folder: Path, nsys) -> float | None:
    return tune_eager(args) if mode == "tune" else bootstrap_baseline(mode, args, folder, nsys)


def summarise(runs: dict) -> dict:
    medians = {mode: statistics.median(values) for mode, values in runs.items() if values}
    ratios = {f"{mode}/{base}": medians[mode] / medians[base] for base in ("none", "tune") if base in medians
              for mode in medians if mode != base}
    return {"ms": runs, "median": medians, "ratios": ratios,
            "max_over_min": {mode: max(v) / min(v) for mode, v in runs.items() if v},
            "sd_of_log": {mode: statistics.stdev(math.log(x) for x in v) for mode, v in runs.items() if len(v) > 1}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="none,torch,nsys", help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--order", choices=("rotate", "fixed"), default="rotate")
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS))
    args = parser.parse_args()
    modes = tuple(args.modes.split(","))
    if not modes or set(modes) - set(MODES):
        parser.error(f"--modes: choose among {', '.join(MODES)}")
    try:   # a missing nsys stops the bench before any run, in one line
        nsys = find_nsys() if {"nsys", "gated"} & set(modes) else None
    except NsysError as error:
        raise SystemExit(f"gpu_baselines: {error}") from None
    runs = {name: {mode: [] for mode in modes} for name in args.only}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name in args.only:
                turn = round_ % len(modes) if args.order == "rotate" else 0   # each mode first once
                for mode in modes[turn:] + modes[:turn]:
                    value = one_run(mode, arguments(name), Path(tmp), nsys)
                    if value is not None:
                        runs[name][mode].append(value)
                    print(f"round {round_} {name} {mode}: {value}", file=sys.stderr, flush=True)
                results = {n: summarise(r) for n, r in runs.items()}
                args.output.write_text(json.dumps({**results, "phases": PHASES}, indent=1) + "\n")
    for name, result in results.items():
        print(f"{name}: " + ", ".join(f"{mode} {[round(v, 3) for v in values]}" for mode, values in result["ms"].items())
              + "; " + ", ".join(f"{pair} {ratio:.3f}" for pair, ratio in result["ratios"].items())
              + "; max/min " + ", ".join(f"{mode} {spread:.2f}" for mode, spread in result["max_over_min"].items()))


if __name__ == "__main__":
    main()
