"""How close can any prediction come to one tune measurement? The measurement's own spread.

tune with ``--runs N`` (N >= 2) times eager and each scope in N fresh processes and keeps the
median. Pairing every eager process with every process of a scope gives the speedups a
single-process tune (``--runs 1``, the default, and how the shipped datasets were measured)
could have printed; the share of them within 20 % of the N-process median is what a perfect
prediction of that median would score against single-process measurements. A scope timed
paired (fwd_bwd, submodule, full_iteration: eager windows alternate with graphed ones in its own process) gives
one speedup per process instead; ``--cross-process`` pairs its processes with eager's as well.

    python bench/gpu_tune_check.py --out OUT --set corpus --scopes full_iteration,fwd_bwd --runs 3 --no-patched-run
    python bench/noise_floor.py OUT/*.py.cg-advise.json [--cross-process]
"""

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.search import eager_slowdown  # noqa: E402

TOLERANCE = 0.2


def _others(values, i):
    return statistics.median(values[:i] + values[i + 1:])


def spreads(result: dict, paired: bool = True) -> list:
    """(scope, median speedup, [(single-process speedup, the median of the processes it was not
    timed in)]) for each scope timed in >= 2 processes: each single speedup is set against
    what the other processes measured, never against a median it is part of. A scope timed
    paired (eager windows in its own process) gives one speedup per process, each with
    graphing's slowdown of the eager windows taken out; with ``paired`` False, or for the
    other scopes, every eager process against every process of the scope."""
    eager = list(result.get("eager_run_ms") or [])
    out = []
    for row in result.get("rows", []):
        runs = list(row.get("run_ms") or [])
        if paired and len(row.get("paired_runs") or []) >= 2:
            singles = [s / eager_slowdown(row["scope"]) for s in row["paired_runs"]]
            pairs = [(v, _others(singles, i)) for i, v in enumerate(singles)]
            out.append((row["scope"] + " (paired)", statistics.median(singles), pairs))
            continue
        if len(eager) < 2 or len(runs) < 2:
            continue
        median = statistics.median(eager) / statistics.median(runs)
        pairs = [(eager[i] / runs[j], _others(eager, i) / _others(runs, j))
                 for i, j in itertools.product(range(len(eager)), range(len(runs)))]
        out.append((row["scope"], median, pairs))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path, nargs="+", help="tune's result files (SCRIPT.cg-advise.json)")
    parser.add_argument("--cross-process", action="store_true",
                        help="for scopes timed paired too, pair every eager process with every process of the scope")
    args = parser.parse_args()
    within, total = {}, {}
    print(f"{'script':22s} {'scope':15s} {'median':>7s}  single-process speedups  within {TOLERANCE:.0%}")
    for path in sorted(args.results):
        result = json.loads(path.read_text())
        for scope, median, pairs in spreads(result, paired=not args.cross_process):
            singles = [v for v, _ in pairs]
            close = sum(abs(v / others - 1) <= TOLERANCE for v, others in pairs)
            within[scope] = within.get(scope, 0) + close
            total[scope] = total.get(scope, 0) + len(singles)
            name = path.name.split(".")[0]
            print(f"{name:22s} {scope:15s} {median:6.2f}x  {min(singles):6.2f}x - {max(singles):6.2f}x"
                  f"       {close}/{len(singles)}")
    for scope in total:
        print(f"{scope}: a single process within {TOLERANCE:.0%} of the other processes' median for {within[scope]} of "
              f"{total[scope]} ({within[scope] / total[scope]:.0%})")


if __name__ == "__main__":
    main()
