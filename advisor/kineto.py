"""Reads a torch.profiler (Kineto) Chrome trace into the same Trace that an nsys export gives.

Kineto's CUDA activity comes from the same CUPTI records Nsight Systems stores: kernels,
copies and memsets (``ph: "X"``, cat ``kernel`` / ``gpu_memcpy`` / ``gpu_memset``, pid = GPU,
tid = stream), runtime and driver calls (cat ``cuda_runtime`` / ``cuda_driver``) tied to
them by ``args.correlation``, and ``record_function`` ranges (cat ``user_annotation``):
the bootstrap's ``cg-advise:*`` ranges, the optimizer's own, ``ProfilerStep#N``. Times are
microseconds as floats; they become integer nanoseconds here, and process and thread ids
become nsys's global ids (pid << 24 | tid), so the analysers see one shape whatever the
backend. What Kineto lacks is said where it matters:

- a graph replay is no one record: Kineto lists every kernel, copy and memset of a replayed
  graph with the ``cudaGraphLaunch``'s correlation (as nsys's ``--cuda-graph-trace=node``
  does). They are collapsed here into one graph-replay operation per launch, from its first
  node's start to its last node's end, whatever streams the nodes ran on: what nsys's default
  graph mode records (one ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE`` row per ``cudaGraphLaunch``).
  So the trace reads as ``graph`` mode: the gaps between a replay's nodes are busy time, and
  a replay is one GPU operation and no kernel, as in an nsys export. (A graph whose nodes run
  on several GPUs, which CUPTI records once on its first node's GPU, gets one replay per GPU:
  the analysis is per GPU.) What no reading can undo is the cost of tracing node by node:
  it stretches each replay on the GPU, by a cost per node (0.630 against 0.602 ms, +4.5 %,
  on the H100, bench/results/backends_h100.md; +8.3 % on a replay of 38 short nodes,
  sample_traces/kineto/user_graphed);
- a range carries no push/pop or start/end type: the ranges that span threads (the
  iteration and backward ranges the bootstrap opens, autograd's device thread launching
  the backward kernels; ``ProfilerStep#N``) are taken as start/end ranges, the rest as
  push/pop ranges of their own thread.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import ranges
from .errors import TraceError
from .trace import (
    CALL_GRAPH_LAUNCH, CALL_LAUNCH, CALL_OTHER, CALL_SYNC, GRAPH_LAUNCH_CALLS, LAUNCH_CALLS, NVTX_DTYPE,
    NVTX_PUSH_POP, NVTX_START_END, OP_GRAPH, OP_KERNEL, OP_MEMCPY, OP_MEMSET, OPS_DTYPE, RUNTIME_DTYPE, SYNC_CALLS,
    Trace, _needed, _sorted_by_start, is_fusible_kernel, is_optimizer_kernel, is_scaler_kernel,
)

BACKEND = "torch.profiler"
GPU_CATEGORIES = {"kernel": OP_KERNEL, "gpu_memcpy": OP_MEMCPY, "gpu_memset": OP_MEMSET}
CALL_CATEGORIES = ("cuda_runtime", "cuda_driver")
RANGE_CATEGORY = "user_annotation"
# ranges that cover work launched from other threads of the process (see the module's docstring)
CROSS_THREAD_RANGES = (ranges.ITERATION, ranges.BACKWARD)
CROSS_THREAD_PREFIXES = ("ProfilerStep#",)
GZIP_MAGIC = b"\x1f\x8b"
THREAD_BITS = 0xFFFFFF


@dataclass
class KinetoTrace(Trace):
    """A Trace read from a Kineto Chrome trace; the whole-run CPU span per process is known
    from the file (every CUDA call, not only those the analysis keeps)."""

    spans: dict = field(default_factory=dict)   # global pid -> (first CUDA call start, last call end)
    details: str = ""
    graph_nodes: int = 0                        # the kernels, copies and memsets collapsed into graph replays

    def cpu_span(self, global_pid: int):
        return self.spans.get(int(global_pid))

    def cpu_span_any(self) -> bool:
        return bool(self.spans)

    @property
    def profiler(self) -> str:
        collapsed = f"; graph replays read from {self.graph_nodes} node records" if self.graph_nodes else ""
        return f"torch.profiler ({self.details}{collapsed})"


def looks_like_json(path: Path) -> bool:
    """A gzip stream or text that opens with ``{``: what ``export_chrome_trace`` writes."""
    with path.open("rb") as handle:
        head = handle.read(64)
    return head.startswith(GZIP_MAGIC) or head.lstrip().startswith(b"{")


def open_kineto(path) -> KinetoTrace:
    """Reads a Kineto trace (.json or .json.gz); one-line TraceError on anything else."""
    path = Path(path)
    try:
        with path.open("rb") as raw:
            compressed = raw.read(2) == GZIP_MAGIC
            raw.seek(0)
            data = json.load(gzip.GzipFile(fileobj=raw) if compressed else raw)
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as error:
        why = error.msg if isinstance(error, json.JSONDecodeError) else (str(error) or type(error).__name__)
        raise TraceError(f"{path}: not a readable torch.profiler trace ({why}); is it truncated?") from None
    events = data.get("traceEvents") if isinstance(data, dict) else None
    if not isinstance(events, list):
        raise TraceError(f"{path}: a JSON file, but not a torch.profiler (Kineto) trace: it has no traceEvents list")
    return _read(path, data, events)


MAX_US = 9.0e15           # microseconds whose nanoseconds still fit an int64
MAX_ID = 2 ** 24          # process and thread ids share one int64 as pid << 24 | tid, as nsys's do


def _number(event: dict, key: str):
    """A finite time in microseconds, else None (the event is skipped: NaN, infinities and
    values past int64 nanoseconds are no times)."""
    value = event.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return value if abs(value) < MAX_US else None   # False for NaN too


def _id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_ID


def _ns(microseconds) -> np.ndarray:
    return np.rint(np.asarray(microseconds, dtype=np.float64) * 1e3).astype(np.int64)


def _global_tid(pid: int, tid: int) -> int:
    return (pid << 24) | (tid & THREAD_BITS)


def _read(path: Path, data: dict, events: list) -> KinetoTrace:
    gpu, calls, annotations = [], [], []
    labels, names = {}, {}
    for event in events:
        if not isinstance(event, dict):
            continue
        phase, category = event.get("ph"), event.get("cat")
        if phase == "M":
            _metadata(event, labels, names)
            continue
        if phase != "X" or not _id(event.get("pid")) or not _id(event.get("tid")):
            continue
        ts, dur = _number(event, "ts"), _number(event, "dur")
        if ts is None or dur is None:
            continue
        if category in GPU_CATEGORIES:
            gpu.append(event)
        elif category in CALL_CATEGORIES:
            calls.append(event)
        elif category == RANGE_CATEGORY:
            annotations.append(event)

    runtime, runtime_category, runtime_names, owner, spans = _calls(calls)
    main_pid = max(spans, key=lambda p: spans[p][1] - spans[p][0]) if spans else _cpu_pid(labels, annotations)
    kernel_names = {}   # kernel name -> its number in ops["name"] (from 1)
    ops, graph_nodes = _ops(gpu, owner, main_pid, runtime, runtime_category, kernel_names)
    nvtx, nvtx_names = _ranges(annotations)
    graph_mode = "graph" if graph_nodes else "none"
    devices = {int(d["id"]): str(d.get("name", "")) for d in data.get("deviceProperties") or []
               if isinstance(d, dict) and isinstance(d.get("id"), int)}
    cupti = data.get("cupti_version")
    details = f"Kineto trace schema {data.get('schemaVersion', '?')}" + (f", CUPTI {cupti}" if cupti else "")
    return KinetoTrace(
        path=path,
        schema_version=str(data.get("schemaVersion", "unknown")),
        nsys_version="",
        graph_mode=graph_mode,
        ops=ops,
        runtime=runtime,
        runtime_category=runtime_category,
        runtime_names=runtime_names,
        has_runtime=bool(calls),
        nvtx=nvtx,
        nvtx_names=nvtx_names,
        processes={pid: names[pid] for pid in names if labels.get(pid) == "CPU"},
        devices=devices,
        pytorch=True,   # torch.profiler's own file
        backend=BACKEND,
        spans={pid << 24: span for pid, span in spans.items()},
        details=details,
        graph_nodes=graph_nodes,
        fusible_names=_name_ids(kernel_names, is_fusible_kernel),
        optimizer_names=_name_ids(kernel_names, is_optimizer_kernel),
        scaler_names=_name_ids(kernel_names, is_scaler_kernel),
    )


def _name_ids(kernel_names: dict, rule) -> np.ndarray:
    """The ids of the kernel names ``rule`` accepts, sorted (as advisor.trace's for an export)."""
    return np.array(sorted(i for name, i in kernel_names.items() if rule(name)), np.int32)


def _metadata(event: dict, labels: dict, names: dict) -> None:
    """process_name and process_labels ("CPU", "GPU 0") of each trace pid."""
    pid, args = event.get("pid"), event.get("args") or {}
    if not isinstance(pid, int) or not isinstance(args, dict):
        return
    if event.get("name") == "process_name" and "name" in args:
        names.setdefault(pid, str(args["name"]))
    elif event.get("name") == "process_labels" and "labels" in args:
        labels.setdefault(pid, str(args["labels"]))


def _cpu_pid(labels: dict, annotations: list) -> int:
    """The profiled process when it made no CUDA call: its ranges' pid, else the CPU-labelled one."""
    if annotations:
        return int(annotations[0]["pid"])
    return next((pid for pid, label in labels.items() if label == "CPU"), 0)


def _correlation(event: dict) -> int:
    args = event.get("args")
    value = args.get("correlation") if isinstance(args, dict) else None
    return int(value) if isinstance(value, (int, float)) else 0


def _calls(calls: list):
    """The CUDA calls the analysis uses (as trace.py keeps them), each call's process by
    correlation id for the GPU operations, and the whole-run CPU span of each process."""
    owner = {}
    spans = {}
    kept = []
    for event in calls:
        pid = int(event["pid"])
        start = event["ts"]
        end = start + event["dur"]
        first, last = spans.get(pid, (start, end))
        spans[pid] = (min(first, start), max(last, end))
        corr = _correlation(event)
        if corr:
            owner[corr] = pid
        name = str(event.get("name", ""))
        if _needed(name):
            kept.append((start, event["dur"], pid, int(event["tid"]), corr, name))
    unique = sorted({row[5] for row in kept})
    ids = {name: i for i, name in enumerate(unique)}
    runtime = np.empty(len(kept), RUNTIME_DTYPE)
    if kept:
        start = _ns([row[0] for row in kept])
        runtime["start"] = start
        runtime["end"] = start + _ns([row[1] for row in kept])
        runtime["tid"] = [_global_tid(row[2], row[3]) for row in kept]
        runtime["corr"] = [row[4] for row in kept]
        runtime["name_id"] = [ids[row[5]] for row in kept]
    runtime = _sorted_by_start(runtime)
    lookup = np.array([_category(name) for name in unique] or [CALL_OTHER], np.int8)
    category = lookup[runtime["name_id"]] if len(runtime) else np.empty(0, np.int8)
    spans_ns = {pid: (int(_ns(first)), int(_ns(last))) for pid, (first, last) in spans.items()}
    return runtime, category, dict(enumerate(unique)), owner, spans_ns


def _category(name: str) -> int:
    if name in LAUNCH_CALLS:
        return CALL_LAUNCH
    if name in GRAPH_LAUNCH_CALLS:
        return CALL_GRAPH_LAUNCH
    if name in SYNC_CALLS:
        return CALL_SYNC
    return CALL_OTHER


def _ops(gpu: list, owner: dict, main_pid: int, runtime: np.ndarray, category: np.ndarray, names: dict):
    """Kernels, copies and memsets, each in the process whose call launched it (the profiled
    process when the call is not in the trace); those a graph launch ran collapsed into one
    replay per launch (see the module's docstring). Each kernel's name is numbered in ``names``.
    Returns (ops, how many were collapsed)."""
    ops = np.empty(len(gpu), OPS_DTYPE)
    if not gpu:
        return ops, 0
    corr = np.array([_correlation(e) for e in gpu], np.int64)
    start = _ns([e["ts"] for e in gpu])
    ops["start"] = start
    ops["end"] = start + _ns([e["dur"] for e in gpu])
    ops["device"] = [_device(e) for e in gpu]
    ops["pid"] = np.array([owner.get(int(c), main_pid) for c in corr], np.int64) << 24
    ops["corr"] = corr
    ops["kind"] = [GPU_CATEGORIES[e["cat"]] for e in gpu]
    ops["name"] = [names.setdefault(str(e.get("name", "")), len(names) + 1) if e["cat"] == "kernel" else 0
                   for e in gpu]
    graph_corr = runtime["corr"][category == CALL_GRAPH_LAUNCH]
    ops["in_graph"] = np.isin(corr, graph_corr) & (corr != 0)
    nodes = int(ops["in_graph"].sum())
    if nodes:
        ops = np.concatenate([ops[~ops["in_graph"]], _replays(ops[ops["in_graph"]])])
    return _sorted_by_start(ops), nodes


def _replays(nodes: np.ndarray) -> np.ndarray:
    """One graph-replay operation per (process, GPU, graph launch) from the nodes it ran: the
    first node's start to the last node's end, as a GRAPH_TRACE row of nsys spans a replay."""
    keys = np.stack([nodes["pid"], nodes["device"], nodes["corr"]])
    launches, which = np.unique(keys, axis=1, return_inverse=True)
    which = which.reshape(-1)
    replays = np.empty(launches.shape[1], OPS_DTYPE)
    replays["pid"], replays["device"], replays["corr"] = launches
    replays["start"] = np.iinfo(np.int64).max
    replays["end"] = np.iinfo(np.int64).min
    np.minimum.at(replays["start"], which, nodes["start"])
    np.maximum.at(replays["end"], which, nodes["end"])
    replays["kind"] = OP_GRAPH
    replays["in_graph"] = True
    replays["name"] = 0
    return replays


def _device(event: dict) -> int:
    args = event.get("args")
    device = args.get("device") if isinstance(args, dict) else None
    return int(device) if isinstance(device, int) else int(event["pid"])


def _ranges(annotations: list):
    """record_function ranges as NVTX rows (see the module's docstring for their type)."""
    if not annotations:
        return np.empty(0, NVTX_DTYPE), []
    texts = [str(e.get("name", "")) for e in annotations]
    names, codes = np.unique(np.array(texts, dtype=object), return_inverse=True)
    rows = np.empty(len(annotations), NVTX_DTYPE)
    start = _ns([e["ts"] for e in annotations])
    rows["start"] = start
    rows["end"] = start + _ns([e["dur"] for e in annotations])
    rows["tid"] = [_global_tid(int(e["pid"]), int(e["tid"])) for e in annotations]
    rows["event_type"] = [NVTX_START_END if _cross_thread(t) else NVTX_PUSH_POP for t in texts]
    rows["name"] = codes
    return rows[np.argsort(rows["start"], kind="stable")], [str(name) for name in names]


def _cross_thread(name: str) -> bool:
    return name in CROSS_THREAD_RANGES or name.startswith(CROSS_THREAD_PREFIXES)
