"""Tune results of the same scripts from separate `cg-advise tune` calls (each `--runs 1`),
merged into one result per script as `--runs N` would have saved it: every process's time in
``eager_run_ms`` and each row's ``run_ms``, their median as the time. A scope measured in only
some of the calls (compile, say, in the first) keeps the processes it had.

    python bench/merge_tune_runs.py OUT RUN1 RUN2 [RUN3 ...]

Each RUNk holds NAME.py.cg-advise.json files (bench/gpu_tune_check.py's OUT); OUT receives the
merged NAME.py.cg-advise.json of every NAME found in any of them (the winner and note are left
out: recompute them with tune where needed). Then
bench/noise_floor.py OUT/*.json reads the spread, and bench/unseen_rows.py beside the profiles
the predictions against the medians.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path


def merged(results: list) -> dict:
    """One result from several of the same script: every process's eager time (each result's
    own processes where it ran several), each scope's processes over every result that
    measured it, the medians as the times, and the speedups recomputed from them."""
    first = dict(results[0])
    first["eager_run_ms"] = [ms for r in results for ms in (r.get("eager_run_ms") or [r["eager_ms"]])]
    first["eager_ms"] = statistics.median(first["eager_run_ms"])
    first["runs"] = sum(r.get("runs") or 1 for r in results)
    for stale in ("eager_window_ms", "winner", "note"):
        first.pop(stale, None)
    scopes = list(dict.fromkeys(row["scope"] for r in results for row in r["rows"]))
    rows = []
    for scope in scopes:
        found = [row for r in results for row in r["rows"] if row["scope"] == scope]
        ok = [row for row in found if row.get("status") == "ok" and row.get("ms_per_iter")]
        if not ok:
            rows.append(found[0])
            continue
        times = [ms for row in ok for ms in (row.get("run_ms") or [row["ms_per_iter"]])]
        row = {key: value for key, value in ok[0].items() if key not in ("window_ms", "recovered")}
        row.update(run_ms=times, ms_per_iter=statistics.median(times), speedup=first["eager_ms"] / statistics.median(times))
        rows.append(row)
    first["rows"] = rows
    return first


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = sorted({p.name for run in args.runs for p in run.glob("*.py.cg-advise.json")})
    for name in names:
        found = [json.loads((run / name).read_text()) for run in args.runs if (run / name).exists()]
        (args.out / name).write_text(json.dumps(merged(found), indent=1) + "\n")
        print(f"{name}: {len(found)} runs", file=sys.stderr)
    if not names:
        raise SystemExit(f"merge_tune_runs: no NAME.py.cg-advise.json in {', '.join(map(str, args.runs))}")


if __name__ == "__main__":
    main()
