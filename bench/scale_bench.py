"""Analysis time of a 1,000,000-kernel export against SQLite's own scan of the same rows.

Builds the big export by replicating the rows of a real sample (its exact schema: every
column copied, times shifted by the trace's span and correlation ids by their range per
copy), then times, side by side in one run:

- aggregate scan: SQLite's own ``count(*), sum(end - start)`` over the kernel and runtime tables;
- raw scan: iterating ``SELECT *`` over them in Python (one tuple per row);
- analysis: ``open_trace`` + ``analyse`` (everything ``cg-advise analyze --json`` computes), with
  the columnar reader (adbc-driver-sqlite + nanoarrow, when installed) and with sqlite3;
- ``nsys stats --report cuda_gpu_kern_sum`` on the same file, where nsys is on PATH.

Prints them, the ratio analysis / aggregate scan (target <= 5) and peak traced memory; both
readers' outputs are checked to be identical.

    python bench/scale_bench.py [--kernels 1000000] [--sample sample_traces/launch_eager.sqlite]
"""

import argparse
import json
import math
import shutil
import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TIMED_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")
REPLICATED = TIMED_TABLES + ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                             "CUPTI_ACTIVITY_KIND_GRAPH_TRACE", "NVTX_EVENTS")


def build(sample: Path, target: Path, kernels: int) -> int:
    shutil.copy(sample, target)
    conn = sqlite3.connect(target)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    base = conn.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = math.ceil(kernels / base)
    lo, hi = conn.execute("SELECT MIN(start), MAX(end) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    span = hi - lo + 1_000_000
    corr = conn.execute("SELECT MAX(correlationId) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0] + 1
    for table in REPLICATED:
        if table not in tables:
            continue
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
        rows = conn.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0]

        def shifted(col):
            if col in ("start", "end"):
                return f"{col} + :k * {span}"
            if col == "correlationId":
                return f"{col} + :k * {corr}"
            return col

        select = ", ".join(shifted(c) for c in cols)
        insert = f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} FROM {table} WHERE rowid <= {rows}"
        for k in range(1, copies):
            conn.execute(insert, {"k": k})
    conn.commit()
    total = conn.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    conn.close()
    return total


def timed_scan(path: Path, query: str, drain) -> float:
    """Seconds to run ``query`` (with {table}) over the kernel and runtime tables and drain it."""
    conn = sqlite3.connect(path)
    started = time.perf_counter()
    for table in TIMED_TABLES:
        drain(conn.execute(query.format(table=table)))
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def raw_scan(path: Path) -> float:
    """Every row into Python, one tuple each."""
    return timed_scan(path, "SELECT * FROM {table}", lambda cursor: sum(1 for _ in cursor))


def aggregate_scan(path: Path) -> float:
    """SQLite's own scan, with nothing handed to Python."""
    return timed_scan(path, "SELECT count(*), sum(end - start) FROM {table}", lambda cursor: cursor.fetchone())


def analysis(path: Path, arrow: bool = True):
    from advisor import columns
    from advisor.analysis import analyse
    from advisor.trace import open_trace

    available = columns.arrow_available
    columns.arrow_available = (lambda: available()) if arrow else (lambda: False)
    try:
        started = time.perf_counter()
        result = analyse(open_trace(path))
        return time.perf_counter() - started, result
    finally:
        columns.arrow_available = available


def nsys_stats(path: Path):
    nsys = shutil.which("nsys")
    if not nsys:
        return None
    import subprocess

    started = time.perf_counter()
    subprocess.run([nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-export", "false",
                    str(path)], capture_output=True)
    return time.perf_counter() - started


def peak_memory(path: Path) -> int:
    """Peak traced allocation of one analysis (a separate run: tracing slows it down)."""
    from advisor.analysis import analyse
    from advisor.trace import open_trace

    tracemalloc.start()
    analyse(open_trace(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, default=1_000_000)
    parser.add_argument("--sample", type=Path, default=ROOT / "sample_traces" / "launch_eager.sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.sqlite"
        started = time.perf_counter()
        kernels = build(args.sample, big, args.kernels)
        print(f"built {big.stat().st_size / 2**20:.0f} MiB export with {kernels} kernels "
              f"in {time.perf_counter() - started:.1f} s")
        raw_scan(big)  # warm the page cache for all
        aggregate = min(aggregate_scan(big) for _ in range(3))
        scan = min(raw_scan(big) for _ in range(2))
        from advisor.columns import arrow_available

        arrow_runs = [analysis(big, arrow=True) for _ in range(3)] if arrow_available() else []
        sqlite_runs = [analysis(big, arrow=False) for _ in range(2)]
        peak = peak_memory(big)
        s = sqlite_runs[0][1].main.summary
        print(f"analysis found {s.iterations} iterations, {s.kernels_per_iteration:.0f} kernels each")
        print(f"SQLite aggregate scan (count, sum) of kernel+runtime: {aggregate:.2f} s")
        print(f"raw scan of kernel+runtime rows in Python:           {scan:.2f} s")
        best_sqlite = min(r[0] for r in sqlite_runs)
        print(f"analysis with the sqlite3 reader:                    {best_sqlite:.2f} s "
              f"({best_sqlite / aggregate:.1f}x the aggregate scan)")
        if arrow_runs:
            best = min(r[0] for r in arrow_runs)
            same = json.dumps(arrow_runs[0][1].to_dict(), default=str) == json.dumps(sqlite_runs[0][1].to_dict(),
                                                                                   default=str)
            print(f"analysis with the columnar reader (adbc):            {best:.2f} s "
                  f"({best / aggregate:.1f}x the aggregate scan, target <= 5; output identical: {same})")
        else:
            print("columnar reader not installed (pip install 'cg-advise[fast]')")
        stats = nsys_stats(big)
        if stats is not None:
            print(f"nsys stats --report cuda_gpu_kern_sum:              {stats:.2f} s")
        print(f"analysis peak traced memory: {peak / 2**20:.0f} MiB ({peak / kernels:.0f} bytes per kernel)")


if __name__ == "__main__":
    main()
