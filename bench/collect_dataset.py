"""Collects the benefit model's dataset on a GPU: for each zoo workload, the eager trace's
features (nsys with cg-advise's options and NVTX bootstrap, then the analyser) and the
untraced ms/iteration of every capture scope.

    source .devkit/nsys-env.sh
    python bench/collect_dataset.py --out OUT [--part 1/2] [--with-compile]

Appends one row per workload to OUT/dataset.csv (a run cut short keeps what it finished).
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor.analysis import analyse  # noqa: E402
from advisor.nsys import export_sqlite, find_nsys  # noqa: E402
from advisor.trace import open_trace  # noqa: E402
from tuner.scopes import SCOPES  # noqa: E402
from zoo import ZOO  # noqa: E402

FEATURES = ("iterations", "kernels_per_iteration", "gpu_ops_per_iteration", "gpu_busy_ms_per_iteration",
            "gpu_period_ms", "gpu_utilization", "gaps_per_iteration", "gap_ms_per_iteration", "kernel_median_us",
            "kernel_share_under_10us", "kernel_share_under_50us", "launch_api_median_us",
            "launch_api_ms_per_iteration", "launch_to_start_median_us", "launch_to_start_p90_us",
            "syncs_per_iteration", "sync_ms_per_iteration")
RUN = [sys.executable, str(ROOT / "bench" / "zoo_run.py")]


def trace_features(nsys, name: str, folder: Path) -> dict:
    report = folder / name
    command = [nsys.path, "profile", "-t", "cuda,nvtx", "--cuda-graph-trace=graph", "-s", "none", "--cpuctxsw=none",
               "-o", str(report), "--force-overwrite", "true", sys.executable, "-m", "advisor.inject", *RUN[1:],
               name, "--steps", "30"]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run(command, check=True, capture_output=True, env=env)
    sqlite = export_sqlite(nsys, report.with_suffix(".nsys-rep"), report.with_suffix(".sqlite"))
    summary = analyse(open_trace(sqlite)).main.summary
    return {key: getattr(summary, key) for key in FEATURES}


def timings(name: str, scopes: list) -> dict:
    rows = {}
    pending = list(scopes)
    while pending:  # a failed capture can poison the process: later scopes retry in a fresh one
        out = subprocess.run([*RUN, name, "--time", "--scopes", ",".join(pending)], capture_output=True, text=True)
        got = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        for row in got:
            rows[row["scope"]] = row
        first_failure = next((i for i, r in enumerate(got) if r["status"] != "ok"), None)
        if not got:
            for scope in pending:
                rows[scope] = {"scope": scope, "ms_per_iter": None, "status": "crashed: " +
                               (out.stderr.strip().splitlines() or ["?"])[-1][:200], "peak_mb": None}
            break
        done = len(got) if first_failure is None else first_failure + 1
        retry = [r["scope"] for r in got[done:] if r["status"] != "ok"]
        pending = retry + pending[len(got):]
        if retry == pending and all(rows[s]["status"] != "ok" for s in retry) and len(retry) == len(got[done:]):
            pending = retry[1:] if len(retry) > 1 else []
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--part", default="1/1", help="K/N: the K-th of N slices of the zoo")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--with-compile", action="store_true")
    parser.add_argument("--traces", type=Path, help="folder for the eager traces (default: OUT/traces)")
    args = parser.parse_args()
    k, n = (int(v) for v in args.part.split("/"))
    names = args.only.split(",") if args.only else list(ZOO)[k - 1::n]
    scopes = [s for s in SCOPES if s != "compile" or args.with_compile]
    args.out.mkdir(parents=True, exist_ok=True)
    traces = args.traces or args.out / "traces"
    traces.mkdir(parents=True, exist_ok=True)
    nsys = find_nsys()
    path = args.out / "dataset.csv"
    columns = (["workload", "family", "optimizer", *FEATURES] +
               [f"{s}_{field}" for s in SCOPES for field in ("ms", "peak_mb", "status")])
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        if new:
            writer.writeheader()
        for name in names:
            started = time.time()
            workload = ZOO[name]
            row = {"workload": name, "family": workload.family, "optimizer": workload.optimizer}
            try:
                row.update(trace_features(nsys, name, traces))
            except Exception as error:
                print(f"{name}: trace failed: {error}", file=sys.stderr)
                continue
            for scope, result in timings(name, scopes).items():
                row[f"{scope}_ms"] = result["ms_per_iter"]
                row[f"{scope}_peak_mb"] = result["peak_mb"]
                row[f"{scope}_status"] = result["status"]
            writer.writerow(row)
            handle.flush()
            ms = {s: row.get(f"{s}_ms") for s in scopes}
            print(f"{name}: busy {row['gpu_busy_ms_per_iteration']:.3f} ms, traced period {row['gpu_period_ms']:.3f} ms, "
                  f"untraced {ms} ({time.time() - started:.0f} s)", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
