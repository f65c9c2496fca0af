"""The events of a few iterations, one by one, for the HTML timeline and the Perfetto trace.

The analysis keeps column arrays without names or streams (a big export has millions of
rows); a timeline needs both, but only for a short window. So this reads that window again
from the export, with plain SQL, capped at a number of events: what the cap leaves out is
counted and said. The gaps are the ones the metrics count: idle time between the group's
GPU operations, inside the iteration windows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

import numpy as np

from .columns import read_only_uri
from .intervals import Union, assign
from .metrics import GroupMetrics
from .trace import (GRAPH_LAUNCH_CALLS, GRAPH_TRACE, KERNEL, LAUNCH_CALLS, MEMCPY, MEMSET, NVTX_START_END,
                    PID_MASK, RUNTIME, SYNC_CALLS, Trace, strip_version)

HTML_ITERATIONS = 3          # iterations the HTML timeline shows
HTML_MAX_EVENTS = 12_000     # events drawn in the HTML page at most (about 150 bytes each)
PERFETTO_MAX_EVENTS = 200_000

# copyKind of CUPTI's memcpy records (the common ones)
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP"}


@dataclass
class Event:
    start: int       # ns, absolute (the export's clock)
    end: int
    name: str
    kind: str        # kernel, memcpy, memset, graph, launch, graph_launch, sync, call, nvtx


@dataclass
class Lane:
    group: str       # "NVTX", "CPU" or "GPU"
    name: str        # "thread 1234", "stream 7", "thread 1234 depth 1"
    events: list = field(default_factory=list)


@dataclass
class Timeline:
    """A window of the run, event by event, for one process on one GPU."""

    start: int                       # ns, the window
    end: int
    iterations: list                 # [(index, gpu_start, gpu_end)] of the iterations shown
    lanes: list                      # Lane, NVTX first, then CPU threads, then GPU streams
    gaps: list                       # [(start, end)] idle GPU time inside iterations
    total_iterations: int
    left_out: dict = field(default_factory=dict)   # kind -> events the cap left out (at least: each
                                                   # table is read up to the cap)

    @property
    def events(self) -> int:
        return sum(len(lane.events) for lane in self.lanes)


def representative(group: GroupMetrics, count: int = HTML_ITERATIONS) -> range:
    """Iterations to show: ``count`` in a row from the one whose period is the median, the
    first (warm-up) left out when there are others, so the picture is a typical one."""
    periods = [row["gpu_period_ms"] for row in group.iterations]
    n = len(periods)
    if n <= count:
        return range(n)
    candidates = range(1, n) if n > 1 else range(n)
    median = float(np.median([periods[i] for i in candidates]))
    middle = min(candidates, key=lambda i: (abs(periods[i] - median), i))
    first = min(max(middle - count // 2, 1), n - count)
    return range(first, first + count)


def build(trace: Trace, group: GroupMetrics, iterations=None, max_events: int = HTML_MAX_EVENTS) -> Timeline:
    """The events of ``iterations`` (indexes into group.iterations; default: representative
    ones; ``range(len(...))`` for the whole analysed window), at most ``max_events``."""
    a_all, b_all = group.distributions["iteration_windows_ns"]
    shown = list(representative(group) if iterations is None else iterations)
    if not shown:
        raise ValueError("no iteration to show")
    cpu_a, cpu_b = group.distributions["cpu_windows_ns"]
    # the CPU side of an iteration may run ahead of its GPU side (a queue, a graph launch)
    start = int(min(a_all[shown[0]], cpu_a[shown[0]]))
    end = int(max(b_all[shown[-1]], cpu_b[shown[-1]]))
    global_pid = _global_pid(trace, group)
    conn = sqlite3.connect(read_only_uri(trace.path), uri=True)
    try:
        tables = {row[0]: {c[1] for c in conn.execute(f"PRAGMA table_info({row[0]})")}
                  for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        strings = "StringIds" in tables
        gpu = _gpu_events(conn, tables, strings, global_pid, group.device, start, end, max_events + 1)
        cpu = _cpu_events(conn, tables, strings, global_pid, start, end, max_events + 1)
    finally:
        conn.close()
    nvtx = _nvtx_events(trace, global_pid, start, end)
    end, left_out = _cap(gpu, cpu, nvtx, end, max_events)
    def in_window(e):
        return (e.start < end)
    lanes = _nvtx_lanes([e for e in nvtx if in_window(e)])
    lanes += [Lane("CPU", f"thread {tid}", [e for e in events if in_window(e)]) for tid, events in sorted(cpu.items())]
    lanes += [Lane("GPU", f"stream {stream}", [e for e in events if in_window(e)])
              for stream, events in sorted(gpu.items())]
    lanes = [lane for lane in lanes if lane.events]
    windows = [(i, int(a_all[i]), int(b_all[i])) for i in shown if a_all[i] < end]
    return Timeline(start=start, end=end, iterations=windows, lanes=lanes,
                    gaps=_gaps(trace, group, global_pid, start, end), total_iterations=len(a_all),
                    left_out=left_out)


def _global_pid(trace: Trace, group: GroupMetrics) -> int:
    pids = np.unique(trace.ops["pid"][(trace.ops["device"] == group.device)])
    return int(next(p for p in pids if (int(p) >> 24) & 0xFFFFFF == group.pid or p == group.pid))


def _gaps(trace: Trace, group: GroupMetrics, global_pid: int, start: int, end: int) -> list:
    """The idle gaps the metrics count (between busy intervals of the group's operations,
    starting inside an iteration window), those that start in [start, end)."""
    ops = trace.ops[(trace.ops["pid"] == global_pid) & (trace.ops["device"] == group.device)]
    gap_starts, gap_lengths = Union.of(ops["start"], ops["end"]).gaps()
    a, b = group.distributions["iteration_windows_ns"]
    inside = assign(gap_starts, a, b - 1) >= 0 if len(a) else np.zeros(len(gap_starts), bool)
    keep = inside & (gap_starts >= start) & (gap_starts < end)
    return [(int(s), int(s + n)) for s, n in zip(gap_starts[keep], gap_lengths[keep])]


def _names(conn, strings: bool) -> dict:
    return dict(conn.execute("SELECT id, value FROM StringIds")) if strings else {}


def _gpu_events(conn, tables, strings, global_pid, device, start, end, limit) -> dict:
    """stream -> [Event] of kernels, copies, memsets and graph replays overlapping the window."""
    names = _names(conn, strings)
    streams: dict = {}
    for table, kind in ((KERNEL, "kernel"), (MEMCPY, "memcpy"), (MEMSET, "memset"), (GRAPH_TRACE, "graph")):
        cols = tables.get(table)
        if not cols:
            continue
        pid = "globalPid" if "globalPid" in cols else "0"
        stream = "streamId" if "streamId" in cols else "0"
        label = {"kernel": next((c for c in ("shortName", "demangledName", "name") if c in cols), "NULL"),
                 "memcpy": "copyKind" if "copyKind" in cols else "NULL",
                 "graph": "graphId" if "graphId" in cols else "NULL"}.get(kind, "NULL")
        rows = conn.execute(
            f"SELECT start, end, coalesce({stream}, 0), {label} FROM {table} "
            f"WHERE coalesce(deviceId, 0) = ? AND coalesce({pid}, 0) = ? AND start < ? AND end > ? "
            f"ORDER BY start LIMIT ?", (int(device), global_pid if pid != "0" else 0, end, start, limit))
        for s, e, st, value in rows:
            streams.setdefault(int(st), []).append(Event(int(s), int(e), _gpu_name(kind, value, names), kind))
    for events in streams.values():
        events.sort(key=lambda e: e.start)
    return streams


def _gpu_name(kind: str, value, names: dict) -> str:
    if kind == "kernel":
        return str(names.get(value, value)) if value is not None else "kernel"
    if kind == "memcpy":
        return f"memcpy {COPY_KINDS.get(value, value)}" if value is not None else "memcpy"
    if kind == "graph":
        return f"graph replay (graph {value})" if value is not None else "graph replay"
    return kind


def _call_kind(name: str) -> str:
    if name in LAUNCH_CALLS:
        return "launch"
    if name in GRAPH_LAUNCH_CALLS:
        return "graph_launch"
    if name in SYNC_CALLS:
        return "sync"
    return "call"


def _cpu_events(conn, tables, strings, global_pid, start, end, limit) -> dict:
    """thread id -> [Event] of every CUDA runtime/driver call of the process in the window."""
    cols = tables.get(RUNTIME)
    if not cols:
        return {}
    names = _names(conn, strings)
    rows = conn.execute(f"SELECT start, end, globalTid, nameId FROM {RUNTIME} WHERE globalTid & ? = ? "
                        f"AND start < ? AND end > ? ORDER BY start LIMIT ?",
                        (int(PID_MASK), global_pid, end, start, limit))
    threads: dict = {}
    for s, e, tid, name_id in rows:
        name = strip_version(str(names.get(name_id, name_id)))
        threads.setdefault(int(tid) & 0xFFFFFF, []).append(Event(int(s), int(e), name, _call_kind(name)))
    return threads


def _nvtx_events(trace: Trace, global_pid: int, start: int, end: int) -> list:
    rows = trace.nvtx[((trace.nvtx["tid"] & PID_MASK) == global_pid) & (trace.nvtx["start"] < end)
                      & (trace.nvtx["end"] > start)]
    return [_NvtxEvent(int(r["start"]), int(r["end"]), trace.nvtx_names[r["name"]], "nvtx",
                       int(r["tid"]) & 0xFFFFFF, int(r["event_type"]) == NVTX_START_END) for r in rows]


@dataclass
class _NvtxEvent(Event):
    tid: int = 0
    start_end: bool = False


def _nvtx_lanes(events: list) -> list:
    """One lane per thread and nesting depth (push/pop ranges nest); start/end ranges, which
    may overlap freely, get lanes of their own, packed greedily."""
    lanes: dict = {}
    for tid in sorted({e.tid for e in events}):
        mine = sorted((e for e in events if e.tid == tid), key=lambda e: (e.start, -e.end))
        stack: list = []
        for e in (e for e in mine if not e.start_end):
            while stack and stack[-1] <= e.start:
                stack.pop()
            lanes.setdefault((tid, len(stack)), []).append(e)
            stack.append(e.end)
        reach: list = []
        for e in (e for e in mine if e.start_end):
            row = next((i for i, r in enumerate(reach) if r <= e.start), len(reach))
            reach[row:row + 1] = [e.end]
            lanes.setdefault((tid, 100 + row), []).append(e)
    return [Lane("NVTX", f"thread {tid}" + (f" depth {depth}" if depth < 100 else f" start/end {depth - 100}"),
                 [Event(e.start, e.end, e.name, e.kind) for e in events])
            for (tid, depth), events in sorted(lanes.items())]


def _cap(gpu: dict, cpu: dict, nvtx: list, end: int, max_events: int):
    """Ends the window early when it holds more than ``max_events`` events: at the start of
    the first one past the cap. Returns (end, {kind: events left out})."""
    everything = [e for events in list(gpu.values()) + list(cpu.values()) for e in events] + nvtx
    if len(everything) <= max_events:
        return end, {}
    everything.sort(key=lambda e: e.start)
    cut = everything[max_events].start
    left_out: dict = {}
    for e in everything:
        if e.start >= cut:
            left_out[e.kind] = left_out.get(e.kind, 0) + 1
    return cut, left_out
