"""Analysis time of a 1,000,000-kernel export against SQLite's own scan of the same rows.

Builds the big export by replicating the rows of a real sample (its exact schema: every
column copied, times shifted by the trace's span and correlation ids by their range per
copy), then times, side by side in one run:

- aggregate scan: SQLite's own ``count(*), sum(end - start)`` over the kernel and runtime tables;
- raw scan: iterating ``SELECT *`` over them in Python (one tuple per row);
- analysis: ``open_trace`` + ``analyse`` (everything ``cg-advise analyze --json`` computes), with
  the columnar reader (adbc-driver-sqlite + nanoarrow, when installed) and with sqlite3;
- ``nsys stats --report cuda_gpu_kern_sum`` on the same file, where nsys is on PATH.

Prints them, the ratio analysis / aggregate scan (target <= 5), and the peak memory of one
analysis: traced by tracemalloc (numpy's arrays included) and the resident set of a fresh
process that only opens and analyses the file (ru_maxrss, the interpreter and numpy included).
Both readers' outputs are checked to be identical. With several sizes, each export is built,
measured and deleted in turn, and the time and memory per kernel show whether cost stays linear.

    python bench/scale_bench.py [--kernels 1000000 [10000000]] [--runs 3]
                                [--sample sample_traces/launch_eager.sqlite] [--tmp /tmp]
"""

import argparse
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
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


RESIDENT = """
import resource, sys, time
from advisor.analysis import analyse
from advisor.trace import open_trace

def peak():  # this process's own high-water mark (ru_maxrss also counts the parent it was forked from)
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

before = peak()
started = time.perf_counter()
analyse(open_trace(sys.argv[1]))
print(time.perf_counter() - started, before, peak())
"""


def peak_resident(path: Path):
    """(seconds, peak resident bytes after the imports, peak resident bytes) of a fresh process
    that opens and analyses the file: what a user's `cg-advise analyze` holds at most."""
    out = subprocess.run([sys.executable, "-c", RESIDENT, str(path)], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


def measure(big: Path, kernels: int, runs: int) -> dict:
    """Everything printed for one export, side by side in this run."""
    from advisor.columns import arrow_available

    print(f"load average before (1, 5, 15 min; {os.cpu_count()} cores): "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    aggregate_scan(big)  # warm the page cache for all
    aggregate = min(aggregate_scan(big) for _ in range(3))
    scan = raw_scan(big)
    arrow_runs = [analysis(big, arrow=True) for _ in range(runs)] if arrow_available() else []
    sqlite_runs = [analysis(big, arrow=False) for _ in range(max(runs - 1, 1))]
    s = sqlite_runs[0][1].main.summary
    print(f"analysis found {s.iterations} iterations, {s.kernels_per_iteration:.0f} kernels each")
    print(f"SQLite aggregate scan (count, sum) of kernel+runtime: {aggregate:.2f} s")
    print(f"raw scan of kernel+runtime rows in Python:           {scan:.2f} s")
    best_sqlite = min(r[0] for r in sqlite_runs)
    print(f"analysis with the sqlite3 reader:                    {best_sqlite:.2f} s "
          f"({best_sqlite / aggregate:.1f}x the aggregate scan; runs: "
          f"{', '.join(f'{r[0]:.2f}' for r in sqlite_runs)})")
    best = best_sqlite
    if arrow_runs:
        best = min(r[0] for r in arrow_runs)
        same = json.dumps(arrow_runs[0][1].to_dict(), default=str) == json.dumps(sqlite_runs[0][1].to_dict(),
                                                                               default=str)
        print(f"analysis with the columnar reader (adbc):            {best:.2f} s "
              f"({best / aggregate:.1f}x the aggregate scan, target <= 5; output identical: {same}; runs: "
              f"{', '.join(f'{r[0]:.2f}' for r in arrow_runs)})")
    else:
        print("columnar reader not installed (pip install 'cg-advise[fast]')")
    del arrow_runs, sqlite_runs
    stats = nsys_stats(big)
    if stats is not None:
        print(f"nsys stats --report cuda_gpu_kern_sum:              {stats:.2f} s")
    print(f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())} (other work on the machine "
          f"slows every figure; the ratio is taken side by side)")
    fresh, base, resident = peak_resident(big)
    peak = peak_memory(big)
    print(f"analysis in a fresh process: {fresh:.2f} s, peak resident {resident / 2**20:.0f} MiB "
          f"({base / 2**20:.0f} MiB after the imports; {(resident - base) / kernels:.0f} bytes per kernel more)")
    print(f"analysis peak traced memory: {peak / 2**20:.0f} MiB ({peak / kernels:.0f} bytes per kernel)")
    return {"kernels": kernels, "analysis": best, "aggregate": aggregate, "resident": resident, "traced": peak}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--runs", type=int, default=3, help="analyses per reader (the best is compared)")
    parser.add_argument("--sample", type=Path, default=ROOT / "sample_traces" / "launch_eager.sqlite")
    parser.add_argument("--tmp", type=Path, default=None, help="folder for the built exports (deleted after)")
    args = parser.parse_args()
    measured = []
    for kernels in args.kernels:
        with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
            big = Path(tmp) / "big.sqlite"
            started = time.perf_counter()
            built = build(args.sample, big, kernels)
            print(f"\nbuilt {big.stat().st_size / 2**20:.0f} MiB export with {built} kernels "
                  f"in {time.perf_counter() - started:.1f} s")
            measured.append(measure(big, built, args.runs))
    if len(measured) > 1:
        print("\nper kernel (linear cost: the same at every size):")
        for m in measured:
            print(f"  {m['kernels']:>9} kernels: analysis {m['analysis'] / m['kernels'] * 1e6:.2f} us, aggregate scan "
                  f"{m['aggregate'] / m['kernels'] * 1e6:.2f} us, ratio {m['analysis'] / m['aggregate']:.1f}x, "
                  f"peak resident {m['resident'] / m['kernels']:.0f} B, traced {m['traced'] / m['kernels']:.0f} B")


if __name__ == "__main__":
    main()
