"""The analysed window as a Chrome trace (JSON ``traceEvents``, ph X and M), which Perfetto
(ui.perfetto.dev) and chrome://tracing open: the same events as the HTML timeline, for
every iteration, plus two tracks of cg-advise's own: the iteration windows and the gaps.

Timestamps are microseconds from the window's start (the format's unit), with the export's
nanosecond clock kept in each event's ``args.start_ns`` for checks against the export.
"""

from __future__ import annotations

import json

from .metrics import GroupMetrics
from .timeline import PERFETTO_MAX_EVENTS, Timeline

# pseudo process ids of the tracks: one "process" per kind of lane, threads inside it
TRACKS = {"cg-advise": 1, "NVTX": 2, "CPU": 3, "GPU": 4}


def chrome_trace(tl: Timeline, group: GroupMetrics, source: str) -> dict:
    events = []
    names = {"cg-advise": "cg-advise: iterations and GPU gaps", "NVTX": "NVTX ranges",
             "CPU": f"CPU: CUDA calls, process {group.pid}", "GPU": f"GPU {group.device}: {group.gpu or '?'}"}
    for track, pid in TRACKS.items():
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": names[track]}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    def us(ns):
        return ((ns - tl.start) / 1e3)

    def thread(pid: int, tid: int, name: str):
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})

    def slice_(pid, tid, name, cat, start, end, **args):
        events.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": us(start),
                       "dur": (end - start) / 1e3, "args": {"start_ns": start, "end_ns": end, **args}})

    thread(TRACKS["cg-advise"], 1, "iterations")
    thread(TRACKS["cg-advise"], 2, "GPU idle (gaps inside iterations)")
    rows = {row["index"]: row for row in group.iterations}
    for index, a, b in tl.iterations:
        row = rows.get(index, {})
        slice_(TRACKS["cg-advise"], 1, f"iteration {index}", "iteration", a, b,
               gpu_busy_ms=row.get("gpu_busy_ms"), gpu_period_ms=row.get("gpu_period_ms"),
               kernels=row.get("kernels"), gaps=row.get("gaps"))
    for a, b in tl.gaps:
        slice_(TRACKS["cg-advise"], 2, "GPU idle", "gap", a, b)
    for k, lane in enumerate(tl.lanes, start=1):
        pid = TRACKS[lane.group]
        thread(pid, k, lane.name)
        for e in lane.events:
            slice_(pid, k, e.name, e.kind, e.start, e.end)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": source, "window_start_ns": tl.start, "window_end_ns": tl.end,
                          "iterations": len(tl.iterations), "max_events": PERFETTO_MAX_EVENTS,
                          "left_out": tl.left_out}}


def to_json(trace: dict) -> str:
    return json.dumps(trace, separators=(",", ":"))
