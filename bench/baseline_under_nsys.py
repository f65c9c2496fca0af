"""Does Nsight Systems, attached but not yet recording, slow the untraced warm-up that the
profile times as its eager baseline? The same zoo script, in fresh processes, one of each per
round in this order:

- ``nsys``: the bootstrap under ``nsys profile`` with cg-advise's own options (capture range
  from the window, so nothing is recorded in the warm-up): the baseline `profile` records;
- ``bare``: the same bootstrap, the same window, without nsys;
- ``tune``: tune's harness timing the script eagerly (the measurement speedups divide by).

Prints each process's figure and, per workload, the medians' ratios (nsys/bare, nsys/tune,
bare/tune) and each variant's spread between processes (max/min, standard deviation of the
log); ``--out`` keeps them all.

    source .devkit/nsys-env.sh
    python bench/baseline_under_nsys.py --runs 3 mlp_w256_d4_b16 gpt_d128_l6_b4_t32 [--out F.json]
"""
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

from advisor.nsys import find_nsys  # noqa: E402
from advisor.profile import (ProfileOptions, Target, bootstrap_command, child_env,  # noqa: E402
                             nsys_command)
from tuner.harness import Settings  # noqa: E402
from tuner.runner import new_workdir, run_candidate  # noqa: E402

SCRIPT = ROOT / "bench" / "workloads" / "zoo_scripts" / "zoo_plain.py"
WARMUP, ITERATIONS, STEPS = 50, 20, 200   # profile's default window; the collection's --steps


def bootstrap_baseline(workload: str, under_nsys: bool, workdir: Path):
    """The untraced baseline (ms/iteration, GPU timeline) the bootstrap timed in one process."""
    options = ProfileOptions(output=workdir / "report", warmup=WARMUP, iterations=ITERATIONS, force=True)
    target = Target(sys.executable, [], [str(SCRIPT), workload, "--steps", str(STEPS)])
    summary = workdir / "summary.json"
    command = nsys_command(find_nsys(), options, target) if under_nsys else bootstrap_command(target)
    try:
        done = subprocess.run(command, env=child_env(options, summary, os.environ), capture_output=True, text=True,
                              timeout=600, cwd=workdir)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"{workload}: the bootstrap ran over 600 s") from None
    untraced = (json.loads(summary.read_text()).get("untraced") or {}) if summary.exists() else {}
    ms = untraced.get("gpu_ms_per_iteration") or untraced.get("host_ms_per_iteration")
    if done.returncode or not ms:
        raise SystemExit(f"{workload}: no untraced baseline (exit {done.returncode}: "
                         f"{(done.stderr.strip().splitlines() or ['no output'])[-1][:300]})")
    return ms


def tune_eager(workload: str):
    settings = Settings(warmup=10, iterations=40, repeats=3)   # as bench/collect_dataset.py tunes
    workdir = new_workdir()
    try:
        measured, _ = run_candidate(SCRIPT, [workload, "--steps", str(STEPS)], "eager", settings, workdir, 600)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if measured.status != "ok":
        raise SystemExit(f"{workload}: {measured.failure}")
    return measured.ms_per_iter


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="+", help="zoo workload names (bench/zoo.py --list)")
    parser.add_argument("--runs", type=int, default=3, help="processes per variant")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {}
    for workload in args.workloads:
        runs = {"nsys": [], "bare": [], "tune": []}
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                runs["nsys"].append(bootstrap_baseline(workload, True, Path(folder)))
            with tempfile.TemporaryDirectory() as folder:
                runs["bare"].append(bootstrap_baseline(workload, False, Path(folder)))
            runs["tune"].append(tune_eager(workload))
        medians = {name: statistics.median(values) for name, values in runs.items()}
        results[workload] = {
            "ms": runs, "median": medians,
            "nsys_over_bare": medians["nsys"] / medians["bare"],
            "nsys_over_tune": medians["nsys"] / medians["tune"],
            "bare_over_tune": medians["bare"] / medians["tune"],
            "max_over_min": {name: max(values) / min(values) for name, values in runs.items()},
            "sd_of_log": {name: statistics.stdev(math.log(v) for v in values) if len(values) > 1 else math.nan
                          for name, values in runs.items()}}
        r = results[workload]
        print(f"{workload}: " + ", ".join(f"{name} {[round(v, 3) for v in values]}" for name, values in runs.items())
              + f"; nsys/bare {r['nsys_over_bare']:.3f}, nsys/tune {r['nsys_over_tune']:.3f}, bare/tune "
              f"{r['bare_over_tune']:.3f}; tune's max/min {r['max_over_min']['tune']:.2f}", flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
