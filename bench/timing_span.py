"""Does a longer timed span, or a mean in place of a median, make one process's eager figure
agree with another's? The lent H100's host launches at two speeds (about 7.2 and 10.2 us an
op) and the mix drifts from second to second (bench/host_speed_probe.py), so a launch-bound
loop timed for 0.2 s (tune's default: 100 steps in 5 windows) reads whichever speed held then,
and the profile's baseline, timed the same way, another: the predictions of #12 miss by as much.

Each workload is timed eagerly by tune's harness in RUNS fresh processes for ITERATIONS steps
in windows of WINDOW steps; from each process's windows this reads the figure tune would print
had it timed the first 5, 25 or all windows, by their median and by their mean, and prints how
far apart the processes are (slowest over fastest) and how many fall within 10 % of the
median process (a prediction that hit it exactly would then be within 20 % of both).

    python bench/timing_span.py --runs 6 --iterations 2000 mlp_w256_d8_b64 gpt_d128_l2_b8_t64 [--out F.json]
    python bench/timing_span.py --summary F.json      # again from a saved run, no GPU
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from eager_noise import SCRIPT, spread  # noqa: E402
from tuner.harness import Settings  # noqa: E402
from tuner.runner import new_workdir, run_candidate  # noqa: E402

PREFIXES = (5, 25, None)   # windows read: tune's default, a few seconds' worth, all of them
ESTIMATORS = {"median": statistics.median, "mean": statistics.fmean}


def figures(windows: list) -> dict:
    """Each (prefix, estimator)'s ms/iteration from one process's windows."""
    out = {}
    for prefix in PREFIXES:
        part = windows[:prefix] if prefix else windows
        for name, estimate in ESTIMATORS.items():
            out[f"{name} of {prefix or 'all'}"] = estimate(part)
    return out


def agreement(values: list) -> tuple:
    """(slowest over fastest, share within 10 % of the median process)."""
    middle = statistics.median(values)
    return spread(values), sum(abs(v / middle - 1) <= 0.10 for v in values) / len(values)


def summarise(results: dict) -> None:
    for workload, runs in results.items():
        per_process = [figures(windows) for windows in runs]
        print(f"{workload}: {len(runs)} processes x {len(runs[0])} windows")
        for key in per_process[0]:
            values = [p[key] for p in per_process]
            apart, share = agreement(values)
            print(f"  {key:12s} {apart:5.2f}x apart, {share:4.0%} within 10 % of the median process  "
                  f"({' '.join(f'{v:.3f}' for v in values)} ms)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", help="zoo workload names (bench/zoo.py --list)")
    parser.add_argument("--runs", type=int, default=6, help="fresh processes per workload")
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--window", type=int, default=20, help="steps per timed window (tune's: 100 / 5)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--summary", type=Path, help="print the figures of a saved --out file")
    args = parser.parse_args()
    if args.summary:
        summarise(json.loads(args.summary.read_text()))
        return
    settings = Settings(iterations=args.iterations, repeats=args.iterations // args.window, to_end=False)
    results = {}
    for workload in args.workloads:
        results[workload] = []
        for _ in range(args.runs):
            measured, _ = run_candidate(SCRIPT, [workload, "--steps", str(settings.warmup + args.iterations + 20)],
                                        "eager", settings, new_workdir(), 900)
            if measured.status != "ok":
                raise SystemExit(f"{workload}: {measured.failure}")
            results[workload].append(measured.window_ms)
        summarise({workload: results[workload]})
        if args.out:
            args.out.write_text(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
