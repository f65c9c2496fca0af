"""Analysis time of a 1,000,000-kernel export against SQLite's own scan of the same rows.

Builds the big export by replicating the rows of a real sample (its exact schema: every
column copied, times shifted by the trace's span and correlation ids by their range per
copy), then times, side by side in one run:

- aggregate scan: SQLite's own ``count(*), sum(end - start)`` over the kernel and runtime tables;
- raw scan: iterating ``SELECT *`` over them in Python (one tuple per row);
- analysis: ``open_trace`` + ``analyse`` (everything ``cg-advise analyze --json`` computes), with
  the columnar reader (adbc-driver-sqlite + nanoarrow, when installed) and with sqlite3;
- ``nsys stats --report cuda_gpu_kern_sum`` on the same file, where an nsys is found ($NSYS,
  PATH, or where installers put it, as ``cg-advise`` looks); one line says why where it fails.

Prints them, the ratio analysis / aggregate scan (target <= 5), the CPU time of the analyses
(user and kernel: the kernel's is mostly page faults), and the peak memory of one analysis:
traced by tracemalloc (numpy's arrays included) and the resident set of a fresh process that
only opens and analyses the file (VmHWM, the interpreter and numpy included), with that first
analysis's time. Both readers' outputs are checked to be identical. The process keeps freed
memory as cg-advise's commands do (advisor/memory.py). With several sizes, each export is
built, measured and deleted in turn, and the time and memory per kernel show whether cost
stays linear: the best analysis in this process (its memory reused) and the fresh process's.

    python bench/scale_bench.py [--kernels 1000000 [10000000]] [--runs 3]
                                [--sample sample_traces/launch_eager.sqlite] [--tmp /tmp]
"""

import argparse
import json
import math
import os
import resource
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


def cpu_times():
    """(user, kernel) CPU seconds of this process, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def analysis(path: Path, arrow: bool = True):
    """(seconds, result, (user, kernel) CPU seconds) of open_trace + analyse."""
    from advisor import columns
    from advisor.analysis import analyse
    from advisor.trace import open_trace

    available = columns.arrow_available
    columns.arrow_available = (lambda: available()) if arrow else (lambda: False)
    try:
        cpu = cpu_times()
        started = time.perf_counter()
        result = analyse(open_trace(path))
        elapsed = time.perf_counter() - started
        return elapsed, result, tuple(after - before for after, before in zip(cpu_times(), cpu))
    finally:
        columns.arrow_available = available


def nsys_stats(path: Path) -> str:
    """The line about ``nsys stats --report cuda_gpu_kern_sum`` on the export: its time, or why
    it did not run."""
    from advisor.nsys import NsysError, find_nsys

    try:
        nsys = find_nsys()
    except NsysError as error:
        return f"nsys stats --report cuda_gpu_kern_sum: not run ({str(error).split(':')[0]})"
    command = [nsys.path, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", "--force-export", "false",
               "--output", "-", str(path)]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"nsys stats --report cuda_gpu_kern_sum: failed ({type(error).__name__}: {error})"
    elapsed = time.perf_counter() - started
    kernels = [line for line in done.stdout.splitlines() if line and line[0].isdigit()]
    if done.returncode != 0 or not kernels:
        why = next((line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()), "no output")
        return (f"nsys stats --report cuda_gpu_kern_sum: failed after {elapsed:.2f} s (exit {done.returncode}, "
                f"nsys {nsys.version}): {why[:200]}")
    return (f"nsys stats --report cuda_gpu_kern_sum:              {elapsed:.2f} s (nsys {nsys.version}, "
            f"{len(kernels)} kernel names summed)")


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
from advisor.memory import keep_freed_memory
from advisor.trace import open_trace

def peak():  # this process's own high-water mark (ru_maxrss also counts the parent it was forked from)
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def disk_read():  # bytes this process had read from the disk (not the page cache); -1 where unknown
    try:
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("read_bytes:"))
    except (OSError, StopIteration, ValueError):
        return -1

keep_freed_memory()   # as cg-advise's commands do
before = peak()
cpu = resource.getrusage(resource.RUSAGE_SELF)
read = disk_read()
started = time.perf_counter()
analyse(open_trace(sys.argv[1]))
elapsed = time.perf_counter() - started
done = resource.getrusage(resource.RUSAGE_SELF)
print(elapsed, before, peak(), done.ru_utime - cpu.ru_utime, done.ru_stime - cpu.ru_stime, done.ru_minflt - cpu.ru_minflt,
      disk_read() - read if read >= 0 else -1)
"""


def peak_resident(path: Path):
    """(seconds, peak resident bytes after the imports, peak resident bytes, user and kernel
    CPU seconds, page faults, bytes read from the disk) of a fresh process that opens and
    analyses the file: what a user's `cg-advise analyze` takes and holds at most."""
    out = subprocess.run([sys.executable, "-c", RESIDENT, str(path)], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2]), float(out[3]), float(out[4]), int(out[5]), int(out[6])


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
    best, cpu = best_sqlite, min(sqlite_runs, key=lambda r: r[0])[2]
    if arrow_runs:
        best, _, cpu = min(arrow_runs, key=lambda r: r[0])
        same = json.dumps(arrow_runs[0][1].to_dict(), default=str) == json.dumps(sqlite_runs[0][1].to_dict(),
                                                                               default=str)
        print(f"analysis with the columnar reader (adbc):            {best:.2f} s "
              f"({best / aggregate:.1f}x the aggregate scan, target <= 5; output identical: {same}; runs: "
              f"{', '.join(f'{r[0]:.2f}' for r in arrow_runs)}; CPU of each, user + kernel: "
              f"{', '.join(f'{r[2][0]:.2f} + {r[2][1]:.2f}' for r in arrow_runs)} s)")
    else:
        print("columnar reader not installed (pip install 'cg-advise[fast]')")
    del arrow_runs, sqlite_runs
    print(nsys_stats(big))
    print(f"load average after: {', '.join(f'{x:.1f}' for x in os.getloadavg())} (other work on the machine "
          f"slows every figure; the ratio is taken side by side)")
    aggregate_scan(big)   # the page cache warm again (a virtual machine may have dropped the file since)
    fresh, base, resident, user, system, faults, disk = peak_resident(big)
    peak = peak_memory(big)
    from_disk = f", {disk / 2**20:.0f} MiB read from the disk" if disk >= 0 else ""
    print(f"analysis in a fresh process: {fresh:.2f} s (CPU {user:.2f} user + {system:.2f} kernel, {faults} page "
          f"faults{from_disk}), peak resident {resident / 2**20:.0f} MiB ({base / 2**20:.0f} MiB after the imports; "
          f"{(resident - base) / kernels:.0f} bytes per kernel more)")
    print(f"analysis peak traced memory: {peak / 2**20:.0f} MiB ({peak / kernels:.0f} bytes per kernel)")
    return {"kernels": kernels, "analysis": best, "aggregate": aggregate, "resident": resident, "traced": peak,
            "cpu": cpu, "fresh": fresh, "fresh_cpu": (user, system)}


def linearity(measured: list) -> None:
    """Cost per kernel at each size, and how much it grew from the smallest to the largest."""
    print("\nper kernel (linear cost: the same at every size):")
    for m in measured:
        n = m["kernels"]
        print(f"  {n:>9} kernels: analysis {m['analysis'] / n * 1e6:.2f} us (CPU {m['cpu'][0] / n * 1e6:.2f} user + "
              f"{m['cpu'][1] / n * 1e6:.2f} kernel), aggregate scan {m['aggregate'] / n * 1e6:.2f} us, ratio "
              f"{m['analysis'] / m['aggregate']:.1f}x; fresh process {m['fresh'] / n * 1e6:.2f} us (CPU "
              f"{m['fresh_cpu'][0] / n * 1e6:.2f} user + {m['fresh_cpu'][1] / n * 1e6:.2f} kernel); peak resident "
              f"{m['resident'] / n:.0f} B, traced {m['traced'] / n:.0f} B")
    small, big = measured[0], measured[-1]

    def per_kernel(m, key):
        return m[key] / m["kernels"] * 1e6

    print(f"linearity, {small['kernels']} -> {big['kernels']} kernels (1.00 = linear): analysis "
          f"{per_kernel(small, 'analysis'):.2f} -> {per_kernel(big, 'analysis'):.2f} us per kernel, ratio "
          f"{per_kernel(big, 'analysis') / per_kernel(small, 'analysis'):.2f}; fresh process "
          f"{per_kernel(small, 'fresh'):.2f} -> {per_kernel(big, 'fresh'):.2f} us, ratio "
          f"{per_kernel(big, 'fresh') / per_kernel(small, 'fresh'):.2f}; aggregate scan ratio "
          f"{per_kernel(big, 'aggregate') / per_kernel(small, 'aggregate'):.2f}; peak resident per kernel ratio "
          f"{(big['resident'] / big['kernels']) / (small['resident'] / small['kernels']):.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--runs", type=int, default=3, help="analyses per reader (the best is compared)")
    parser.add_argument("--sample", type=Path, default=ROOT / "sample_traces" / "launch_eager.sqlite")
    parser.add_argument("--tmp", type=Path, default=None, help="folder for the built exports (deleted after)")
    args = parser.parse_args()
    from advisor.memory import keep_freed_memory

    print(f"freed memory kept for reuse, as cg-advise's commands do (glibc): {keep_freed_memory()}")
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
        linearity(measured)


if __name__ == "__main__":
    main()
