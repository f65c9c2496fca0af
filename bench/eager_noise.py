"""Where the eager timing's noise comes from: the same zoo script timed eagerly by tune's
harness in fresh processes, unpinned and pinned to a set of CPUs in alternation. Within a
process the harness takes the median of its windows; this prints each process's figure and
its windows' spread, so that noise between processes (core placement, the host) can be told
from noise within one (warm-up, the GPU's clocks).

    python bench/eager_noise.py --runs 6 --cpus 0-3 mlp_w256_d8_b64 gpt_d128_l2_b8_t64 [--out F.json]
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.harness import Settings, parse_cpus  # noqa: E402
from tuner.runner import new_workdir, run_candidate  # noqa: E402

SCRIPT = ROOT / "bench" / "workloads" / "zoo_scripts" / "zoo_plain.py"


def spread(values) -> float:
    values = [v for v in values if v]
    return max(values) / min(values) if values else float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workloads", nargs="+", help="zoo workload names (bench/zoo.py --list)")
    parser.add_argument("--runs", type=int, default=6, help="processes per placement")
    parser.add_argument("--cpus", default="0-3", help="the pinned placement, e.g. 0-3")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    placements = {"any": Settings(iterations=args.iterations, repeats=args.repeats),
                  f"cpus {args.cpus}": Settings(iterations=args.iterations, repeats=args.repeats,
                                                cpus=parse_cpus(args.cpus))}
    results = {}
    for workload in args.workloads:
        runs = {name: [] for name in placements}
        for _ in range(args.runs):
            for name, settings in placements.items():
                measured, _ = run_candidate(SCRIPT, [workload, "--steps", str(settings.warmup + args.iterations + 20)],
                                            "eager", settings, new_workdir(), 600)
                if measured.status != "ok":
                    raise SystemExit(f"{workload}: {measured.failure}")
                runs[name].append({"ms": measured.ms_per_iter, "windows": measured.window_ms})
        results[workload] = {
            name: {"ms": [r["ms"] for r in rs], "between_processes": spread([r["ms"] for r in rs]),
                   "within_process_median": statistics.median([spread(r["windows"]) for r in rs if r["windows"]]
                                                              or [float("nan")]),
                   "windows": [r["windows"] for r in rs]}
            for name, rs in runs.items()}
        for name, r in results[workload].items():
            print(f"{workload} [{name}]: ms {[round(v, 3) for v in r['ms'] if v]} between processes "
                  f"{r['between_processes']:.2f}x, within a process (median) {r['within_process_median']:.2f}x",
                  flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
