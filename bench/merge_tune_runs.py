"""Tune results of the same scripts from separate `cg-advise tune` calls (each `--runs 1`),
merged into one result per script as `--runs N` would have saved it: every process's time in
``eager_run_ms`` and each row's ``run_ms``, their median as the time. A scope measured in only
some of the calls (compile, say, in the first) keeps the processes it had.

    python bench/merge_tune_runs.py OUT RUN1 RUN2 [RUN3 ...]

Each RUNk holds NAME.py.cg-advise.json files (bench/gpu_tune_check.py's OUT); OUT receives the
merged NAME.py.cg-advise.json of every NAME found in RUN1 and the others. Then
bench/noise_floor.py OUT/*.json reads the spread, and bench/unseen_rows.py beside the profiles
the predictions against the medians.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path


def merged(results: list) -> dict:
    first = dict(results[0])
    first["eager_run_ms"] = [r["eager_ms"] for r in results]
    first["eager_ms"] = statistics.median(first["eager_run_ms"])
    first["runs"] = len(results)
    rows = []
    for row in results[0]["rows"]:
        times = [other["ms_per_iter"] for r in results for other in r["rows"]
                 if other["scope"] == row["scope"] and other.get("status") == "ok" and other.get("ms_per_iter")]
        row = dict(row)
        if times:
            row.update(run_ms=times, ms_per_iter=statistics.median(times), status="ok")
        rows.append(row)
    first["rows"] = rows
    return first


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    names = sorted(p.name for p in args.runs[0].glob("*.py.cg-advise.json"))
    for name in names:
        found = [json.loads((run / name).read_text()) for run in args.runs if (run / name).exists()]
        (args.out / name).write_text(json.dumps(merged(found), indent=1) + "\n")
        print(f"{name}: {len(found)} runs", file=sys.stderr)
    if not names:
        raise SystemExit(f"merge_tune_runs: no NAME.py.cg-advise.json in {args.runs[0]}")


if __name__ == "__main__":
    main()
