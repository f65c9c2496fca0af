"""Metrics of one process on one GPU: per iteration, for the run, and per NVTX range.

Everything is vectorised over the column arrays of a Trace. Times inside are nanoseconds;
what leaves this module is milliseconds or microseconds, named so.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np

from .intervals import Union, assign, count_within, in_order
from .iterations import IterationRanges, find_iterations, masked_labels, outermost, process_rows, project
from .phases import Phases, measure, share_of, small_kernel_share
from .steps import KernelSequence
from .trace import (CALL_GRAPH_LAUNCH, CALL_SYNC, HOST_TO_DEVICE, OP_GRAPH, OP_KERNEL, OP_MEMCPY,
                    PID_MASK, Trace, pid_of)

GPU_BOUND_UTILIZATION = 0.9   # above it, at most 1/0.9 = 11 % is left to win by removing gaps
SYNC_BOUND_SHARE = 0.25       # share of the CPU iteration spent blocked in host syncs
GAP_BUCKETS_US = (5, 50, 1000)  # histogram edges: <5 us, 5-50 us, 50 us-1 ms, >=1 ms
GAP_LABELS = ("<5us", "5-50us", "50us-1ms", ">=1ms")
GRAPHED_SHARE = 0.5           # share of GPU busy time in graphs above which a run counts as graphed
MAX_RANGE_GROUPS = 50         # NVTX range names analysed per process, by CPU time
QUEUE_AHEAD_US = 50           # launch-to-start delay above which the launch queue runs ahead
QUEUED_SYNC_SHARE = 0.02      # with the queue ahead, syncs this large explain the gaps


def verdict(utilization: float, sync_share: float, graphed_share: float = 0.0, queue_ahead: bool = False) -> str:
    """launch-bound, gpu-bound or sync-bound: what limits this span of work; graphed when
    most of it already runs in CUDA graphs. Launch-bound needs a GPU that waits on the CPU:
    when kernels wait in the queue (``queue_ahead``), the gaps are not launch cost, and the
    verdict is the syncs' (copies, waits) or the GPU's."""
    if graphed_share >= GRAPHED_SHARE:
        return "graphed"
    if utilization >= GPU_BOUND_UTILIZATION:
        return "gpu-bound"
    if sync_share >= SYNC_BOUND_SHARE or (queue_ahead and sync_share > QUEUED_SYNC_SHARE):
        return "sync-bound"
    return "gpu-bound" if queue_ahead else "launch-bound"


def _median(values) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.median(values)) if len(values) else 0.0


def _percentile(values, q) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.percentile(values, q)) if len(values) else 0.0


@dataclass
class Gaps:
    count: int
    total_ms: float
    p50_us: float
    p90_us: float
    p99_us: float
    histogram: dict

    @classmethod
    def of(cls, lengths_ns: np.ndarray) -> "Gaps":
        us = lengths_ns / 1e3
        bins = np.searchsorted(GAP_BUCKETS_US, us, side="right")   # np.digitize's bins, for increasing edges
        counts = np.bincount(bins, minlength=len(GAP_LABELS))
        p50, p90, p99 = np.percentile(us, (50, 90, 99)) if len(us) else (0.0, 0.0, 0.0)
        return cls(int(len(us)), float(lengths_ns.sum() / 1e6), float(p50), float(p90), float(p99),
                   dict(zip(GAP_LABELS, (int(c) for c in counts))))


@dataclass
class Summary:
    """The run's figures: per-iteration ones are medians over its iterations."""

    iterations: int
    iteration_source: str
    iteration_candidates: list       # repeated ranges considered, with the share of GPU time each launches
    kernels_per_iteration: float
    gpu_ops_per_iteration: float
    gpu_busy_ms_per_iteration: float
    gpu_period_ms: float
    gpu_utilization: float
    ideal_graphed_ms: float          # the physical limit: a perfect capture leaves GPU busy time
    bound_speedup: float             # period / busy, in the traced run
    gaps_per_iteration: float
    gap_ms_per_iteration: float
    gaps: Gaps                       # every gap inside the iterations
    kernel_median_us: float
    kernel_share_under_10us: float
    kernel_share_under_50us: float
    launch_api_median_us: float
    launch_api_ms_per_iteration: float
    launch_to_start_median_us: float
    launch_to_start_p90_us: float
    syncs_per_iteration: float
    sync_ms_per_iteration: float
    sync_calls: dict                 # call name -> count inside the iterations
    graph_launches_per_iteration: float
    graphed_share: float             # share of GPU busy time spent in graph replays / graph nodes
    iteration_busy_share: float      # share of the run's GPU busy time inside the iterations
    small_kernel_share: float        # share of kernel time in kernels under 20 us (what fusion merges)
    fusible_kernel_share: float      # share of kernel time in the kernel families compile generates itself
    phases: Phases                   # host time per phase of the iteration (traced clock)
    verdict: str
    reasons: list = field(default_factory=list)
    grad_scaler: bool = False        # a GradScaler's update kernel ran in the iterations (AMP): patch keeps
                                     # the optimizer step eager under a full-iteration graph


@dataclass
class RangeMetrics:
    """One NVTX range name, its GPU work projected through the launching call's correlationId."""

    name: str
    calls: int
    kernels_per_call: float
    gpu_busy_ms_per_call: float
    gpu_span_ms_per_call: float
    cpu_ms_per_call: float
    gpu_utilization: float
    launch_api_ms_per_call: float
    syncs_per_call: float
    verdict: str


@dataclass
class GroupMetrics:
    """One process on one GPU."""

    pid: int
    process: str
    device: int
    gpu: str
    summary: Summary
    iterations: list
    ranges: list
    # the raw figures behind the summary's gap and kernel statistics, for the plots of the
    # HTML report (never in JSON): gap lengths inside iterations and kernel durations, in ns
    distributions: dict = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """Shallow where the parts are plain already (per-iteration rows are dicts): a deep
        ``asdict`` of thousands of iterations cost more than the analysis of a big export."""
        return {"pid": self.pid, "process": self.process, "device": self.device, "gpu": self.gpu,
                "summary": asdict(self.summary), "iterations": self.iterations,
                "ranges": [asdict(r) for r in self.ranges]}


@dataclass
class _Launches:
    """For each GPU operation, the runtime call that launched it (-1 where none matched)."""

    index: np.ndarray
    api_start: np.ndarray
    api_end: np.ndarray
    api_tid: np.ndarray
    _order: tuple = ()

    @property
    def order(self) -> np.ndarray | None:
        """An argsort of the launch times, None where they are in order already (one thread
        launches in the order the GPU runs): made once for the many range lookups that use it."""
        if not self._order:
            self._order = (None if in_order(self.api_start) else np.argsort(self.api_start, kind="stable"),)
        return self._order[0]


def match_launches(trace: Trace, ops: np.ndarray) -> _Launches:
    """Joins operations to runtime calls on (process, correlationId), as nsys does."""
    rt = trace.runtime
    # OS pids stay below 2**22 on Linux and correlation ids below 2**39: one int64 key
    rt_key = pid_of(rt["tid"]) << 39 | rt["corr"]
    op_key = pid_of(ops["pid"]) << 39 | ops["corr"]
    if not len(rt):
        return _Launches(np.full(len(ops), -1), *(np.zeros(len(ops), np.int64) for _ in range(3)))
    if in_order(rt_key):   # one process: ids grow with time
        order, sorted_keys = None, rt_key
    else:
        order = np.argsort(rt_key, kind="stable")
        sorted_keys = rt_key[order]
    pos = np.searchsorted(sorted_keys, op_key)
    pos_clipped = np.minimum(pos, len(sorted_keys) - 1)
    found = (pos < len(sorted_keys)) & (sorted_keys[pos_clipped] == op_key)
    index = np.where(found, pos_clipped if order is None else order[pos_clipped], -1)
    if found.all():   # every operation's call is in the export: no blanks to fill
        return _Launches(index, rt["start"][index], rt["end"][index], rt["tid"][index])
    safe = np.maximum(index, 0)
    return _Launches(index, *(np.where(found, rt[col][safe], 0) for col in ("start", "end", "tid")))


def _owners(rows: np.ndarray, launches: _Launches) -> np.ndarray:
    """The range (index into rows) each GPU operation was launched from; -1 for none, and for
    an operation whose launching call was not found."""
    owner = project(rows, launches.api_start, launches.api_tid, launches.order)
    owner[launches.index < 0] = -1
    return owner


def _gpu_share(launches: _Launches, durations: np.ndarray, rows: np.ndarray) -> float:
    """Share of the group's GPU time launched from inside these ranges."""
    owner = _owners(rows, launches)
    total = durations.sum()
    return float(durations[owner >= 0].sum() / total) if total else 0.0


def analyse_group(trace: Trace, global_pid: int, device: int, pattern: str | None) -> GroupMetrics:
    in_group = (trace.ops["pid"] == global_pid) & (trace.ops["device"] == device)
    ops = trace.ops if in_group.all() else trace.ops[in_group]   # one process on one GPU: no copy
    launches = match_launches(trace, ops)
    busy = Union.of(ops["start"], ops["end"])
    op_ns = ops["end"] - ops["start"]
    durations = op_ns.astype(float)
    found = find_iterations(trace, global_pid, pattern, partial(_gpu_share, launches, durations),
                            KernelSequence(ops, launches, trace.optimizer_names))
    del durations   # every big array let go as soon as it is done with: at 10M kernels, each is 80 MB

    in_process = (trace.runtime["tid"] & PID_MASK) == global_pid
    windows, cpu_windows, source, iteration_ends = _windows(trace, ops, launches, found, global_pid)
    a, b = windows
    n = len(a)
    period = (b - a).astype(float)
    busy_ns = busy.busy_within(a, b).astype(float)

    starts = ops["start"]
    is_kernel = ops["kind"] == OP_KERNEL
    durations_ns = op_ns[is_kernel]
    del op_ns
    kernels = count_within(starts, a, b, is_kernel)
    gpu_ops = count_within(starts, a, b)
    # kernels launched one by one (graph nodes share their graph launch's correlationId)
    matched_kernel = is_kernel & ~ops["in_graph"] & (launches.index >= 0)
    api_ns = np.where(matched_kernel, launches.api_end - launches.api_start, 0)
    launch_ms = count_within(starts, a, b, api_ns) / 1e6

    gap_starts, gap_lengths = busy.gaps()
    gap_window = assign(gap_starts, a, b - 1) if n else np.full(len(gap_starts), -1)
    inside = gap_window >= 0
    window_of_gap, gap_inside = gap_window[inside], gap_lengths[inside]   # the gaps inside iterations
    del gap_starts, gap_lengths, gap_window, inside
    gaps_per_iter = np.bincount(window_of_gap, minlength=n)
    gap_ns_per_iter = np.bincount(window_of_gap, weights=gap_inside, minlength=n)
    del window_of_gap
    busy_total = busy.total
    del busy

    sync_rows, sync_per_iter, sync_ns_per_iter = _syncs(trace, in_process, cpu_windows)
    # the per-range metrics on the second core while this one does the summary: numpy lets go
    # of the GIL in its passes over big arrays (0.42 -> 0.33 s of analysis at 1M kernels)
    launches.order  # noqa: B018 - computed here once, not raced for by the two threads
    worker = ThreadPoolExecutor(1)
    ranges = worker.submit(_range_metrics, trace, global_pid, ops, launches, api_ns, sync_rows)
    worker.shutdown(wait=False)   # its one task still runs; ranges.result() waits for it
    graph_calls = (trace.runtime_category == CALL_GRAPH_LAUNCH) & in_process
    graph_launches = count_within(trace.runtime["start"][graph_calls], *cpu_windows)

    durations_us = durations_ns / 1e3
    delay_us = (ops["start"] - launches.api_end)[matched_kernel] / 1e3
    api_us = api_ns[matched_kernel] / 1e3
    graphed = ops["in_graph"] | (ops["kind"] == OP_GRAPH)
    graphed_share = Union.of(ops["start"][graphed], ops["end"][graphed]).total / busy_total if busy_total else 0.0
    cpu_period = (cpu_windows[1] - cpu_windows[0]).astype(float)

    util_each = np.divide(busy_ns, period, out=np.zeros(n), where=period > 0)
    med_busy, med_period = _median(busy_ns) / 1e6, _median(period) / 1e6
    utilization = _median(util_each)
    sync_share = _median(np.divide(sync_ns_per_iter, cpu_period, out=np.zeros(n), where=cpu_period > 0))
    delay_median = _median(delay_us)
    summary = Summary(
        iterations=n,
        iteration_source=source,
        iteration_candidates=found.considered if found is not None else [],
        kernels_per_iteration=_median(kernels),
        gpu_ops_per_iteration=_median(gpu_ops),
        gpu_busy_ms_per_iteration=med_busy,
        gpu_period_ms=med_period,
        gpu_utilization=utilization,
        ideal_graphed_ms=med_busy,
        bound_speedup=med_period / med_busy if med_busy else 0.0,
        gaps_per_iteration=_median(gaps_per_iter),
        gap_ms_per_iteration=_median(gap_ns_per_iter) / 1e6,
        gaps=Gaps.of(gap_inside),
        kernel_median_us=_median(durations_us),
        kernel_share_under_10us=float(np.mean(durations_us < 10)) if len(durations_us) else 0.0,
        kernel_share_under_50us=float(np.mean(durations_us < 50)) if len(durations_us) else 0.0,
        launch_api_median_us=_median(api_us),
        launch_api_ms_per_iteration=_median(launch_ms),
        launch_to_start_median_us=delay_median,
        launch_to_start_p90_us=_percentile(delay_us, 90),
        syncs_per_iteration=_median(sync_per_iter),
        sync_ms_per_iteration=_median(sync_ns_per_iter) / 1e6,
        sync_calls=_sync_names(trace, sync_rows),
        graph_launches_per_iteration=_median(graph_launches),
        graphed_share=graphed_share,
        iteration_busy_share=float(busy_ns.sum() / busy_total) if busy_total else 0.0,
        small_kernel_share=small_kernel_share(durations_ns),
        fusible_kernel_share=share_of(durations_ns, np.isin(ops["name"][is_kernel], trace.fusible_names)),
        grad_scaler=bool(len(trace.scaler_names) and count_within(
            starts, a, b, is_kernel & np.isin(ops["name"], trace.scaler_names)).sum()),
        phases=measure(trace, global_pid, cpu_windows, iteration_ends, sync_rows, launches.api_start,
                       launches.api_tid, found.optimizer_rows if found is not None else None,
                       is_kernel & ~ops["in_graph"], batch_copies(ops)),
        verdict=verdict(utilization, sync_share, graphed_share, delay_median >= QUEUE_AHEAD_US),
    )
    summary.reasons = _reasons(summary, sync_share)
    per_iteration = [
        {"index": i, "gpu_start_ns": int(a[i]), "gpu_period_ms": period[i] / 1e6, "gpu_busy_ms": busy_ns[i] / 1e6,
         "gpu_utilization": util_each[i], "kernels": int(kernels[i]), "gaps": int(gaps_per_iter[i]),
         "gap_ms": gap_ns_per_iter[i] / 1e6, "launch_api_ms": float(launch_ms[i]), "syncs": int(sync_per_iter[i]),
         "graph_launches": int(graph_launches[i])}
        for i in range(n)
    ]
    pid = int(pid_of(global_pid))
    return GroupMetrics(
        pid=pid,
        process=trace.processes.get(pid, ""),
        device=int(device),
        gpu=trace.devices.get(int(device), ""),
        summary=summary,
        iterations=per_iteration,
        ranges=ranges.result(),
        distributions={"gap_ns": gap_inside, "kernel_ns": durations_ns,
                       "iteration_windows_ns": (a, b), "cpu_windows_ns": cpu_windows},
    )


def batch_copies(ops: np.ndarray) -> np.ndarray:
    """The eager copies that may bring a batch to the GPU: host to device, or of a direction
    the export does not record; not a logged loss's copy back, which ends no batch's loading."""
    return (ops["kind"] == OP_MEMCPY) & ~ops["in_graph"] & np.isin(ops["name"], (0, *HOST_TO_DEVICE))


def _first_of_each(owner: np.ndarray):
    """The owners (>= 0) that occur, sorted, and where each first occurs: np.unique's answer,
    without its sort where the owners follow one another in order (iterations follow time)."""
    at = np.flatnonzero(owner >= 0)
    owned = owner[at]
    if in_order(owned):
        head = np.empty(len(owned), bool)
        head[:1] = True
        np.not_equal(owned[1:], owned[:-1], out=head[1:])
        return owned[head], at[head]
    used, first = np.unique(owner, return_index=True)
    keep = used >= 0
    return used[keep], first[keep]


def _windows(trace, ops, launches, found: IterationRanges | None, global_pid: int):
    """GPU windows [a, b) per iteration (first operation of one to the first of the next) and
    the matching CPU windows (range start to next range start)."""
    if found is not None and len(found.rows) and len(ops):
        rows = found.rows
        owner = _owners(rows, launches)
        used, first = _first_of_each(owner)   # ops are sorted by start
        if len(used):
            a = ops["start"][first]
            last_end = np.zeros(len(rows), np.int64)
            np.maximum.at(last_end, owner[owner >= 0], ops["end"][owner >= 0])
            b = np.append(a[1:], last_end[used[-1]])
            cpu_a = rows["start"][used]
            cpu_b = np.append(cpu_a[1:], rows["end"][used[-1]])
            return (a, b), (cpu_a, cpu_b), found.source, rows["end"][used]
    # the whole run is one window
    if len(ops) == 0:
        empty = np.empty(0, np.int64)
        return (empty, empty), (empty, empty), "none (no GPU work)", empty
    a, b = ops["start"][:1], np.array([ops["end"].max()])
    span = trace.cpu_span(global_pid)
    cpu = (np.array([span[0]]), np.array([span[1]])) if span else (a, b)
    if found is None:
        why = "no iteration ranges found, nor a training step its kernels repeat"
    elif not len(found.rows):
        shares = ", ".join(f"{c['range']!r} {c['gpu_share']:.0%}" + (f" ({c['not_iterations']})" if
                           c.get("not_iterations") else "") for c in found.considered[:3])
        why = f"no repeated range launches most of the GPU work as one step a range: {shares}"
    else:
        why = f"the {found.source} launched no GPU work"
    return (a, b), cpu, f"whole run ({why})", cpu[1]


def _syncs(trace, in_process, cpu_windows):
    rows = trace.runtime[in_process & (trace.runtime_category == CALL_SYNC)]
    if len(cpu_windows[0]):  # only the syncs inside iterations
        rows = rows[assign(rows["start"], cpu_windows[0], cpu_windows[1] - 1) >= 0]
    per_iter = count_within(rows["start"], *cpu_windows)
    ns = count_within(rows["start"], *cpu_windows, weights=rows["end"] - rows["start"])
    return rows, per_iter, ns


def _sync_names(trace, rows) -> dict:
    ids, counts = np.unique(rows["name_id"], return_counts=True)
    return {trace.runtime_names.get(int(i), str(i)): int(c) for i, c in zip(ids, counts)}


def _reasons(s: Summary, sync_share: float) -> list:
    reasons = [
        f"GPU busy {s.gpu_busy_ms_per_iteration:.3f} ms of each {s.gpu_period_ms:.3f} ms iteration "
        f"({s.gpu_utilization:.0%}); a perfect graph takes it to {s.ideal_graphed_ms:.3f} ms "
        f"(at most {s.bound_speedup:.2f}x, traced)",
        f"{s.kernels_per_iteration:.0f} kernels per iteration, median {s.kernel_median_us:.1f} us, "
        f"{s.kernel_share_under_10us:.0%} under 10 us; {s.gaps_per_iteration:.0f} gaps "
        f"({s.gap_ms_per_iteration:.3f} ms) per iteration",
    ]
    if s.launch_to_start_median_us or s.launch_api_median_us:
        starved = "the GPU waits on the CPU" if s.launch_to_start_median_us < QUEUE_AHEAD_US else "the queue runs ahead of the GPU"
        reasons.append(f"launch call median {s.launch_api_median_us:.1f} us; launch-to-start median "
                       f"{s.launch_to_start_median_us:.1f} us: {starved}")
    if s.syncs_per_iteration:
        reasons.append(f"{s.syncs_per_iteration:.0f} host syncs per iteration ({sync_share:.0%} of CPU time "
                       f"blocked): each one breaks stream capture, move it out of the captured region")
    if s.graphed_share > 0.05:
        reasons.append(f"{s.graphed_share:.0%} of GPU busy time already runs in CUDA graphs")
    return reasons


def busy_per_owner(starts, ends, owner, owners: int) -> np.ndarray:
    """Union length of each owner's intervals (inputs sorted by start, owner >= 0): shifting
    each owner's intervals into its own time band makes one vectorised union do them all."""
    if len(starts) == 0:
        return np.zeros(owners)
    base = starts.min()
    band = int(ends.max() - base) + 1
    shift = owner * band
    shift -= base
    keys = starts + shift
    shifted_ends = np.add(ends, shift, out=shift)   # the shift is done with
    if not in_order(keys):   # in order already when owners follow time
        order = np.argsort(keys, kind="stable")
        keys, shifted_ends = keys[order], shifted_ends[order]
    merged = Union.of(keys, shifted_ends)
    del keys, shifted_ends
    return np.bincount(merged.starts // band, weights=merged.ends - merged.starts, minlength=owners)


def range_groups(trace, rows_all, limit: int = MAX_RANGE_GROUPS) -> list:
    """NVTX names grouped with their numbers masked ("step 12" and "step 13" are "step #"),
    the `limit` groups with the most CPU time first: (label, row mask)."""
    labels = masked_labels(trace)
    row_labels = labels[rows_all["name"]] if len(rows_all) else np.array([], dtype=object)
    unique, inverse = np.unique(row_labels, return_inverse=True)
    totals = np.bincount(inverse, weights=rows_all["end"] - rows_all["start"], minlength=len(unique))
    order = np.argsort(-totals, kind="stable")[:limit]
    return [(str(unique[g]), inverse == g) for g in order]


def _first_start_last_end(starts, ends, owner, owners: int):
    """Earliest start and latest end of each owner's intervals (sorted by start)."""
    first = np.full(owners, np.iinfo(np.int64).max)
    last = np.zeros(owners, np.int64)
    if in_order(owner):   # owners follow time: each one's intervals are one run, its first the earliest
        heads = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
        first[owner[heads]] = starts[heads]
        last[owner[heads]] = np.maximum(np.maximum.reduceat(ends, heads), 0)
    else:
        np.minimum.at(first, owner, starts)
        np.maximum.at(last, owner, ends)
    return first, last


def _range_metrics(trace, global_pid, ops, launches, api_ns, sync_rows) -> list:
    rows_all = process_rows(trace, global_pid)
    results = []
    is_kernel = ops["kind"] == OP_KERNEL
    op_start, op_end = np.ascontiguousarray(ops["start"]), np.ascontiguousarray(ops["end"])
    for label, in_group in range_groups(trace, rows_all):
        rows = outermost(rows_all[in_group])
        owner = _owners(rows, launches)
        mine = owner >= 0
        if not mine.any():
            continue
        calls = len(rows)
        o = owner[mine]
        starts, ends = op_start[mine], op_end[mine]
        busy = busy_per_owner(starts, ends, o, calls)
        first, last = _first_start_last_end(starts, ends, o, calls)
        del starts, ends
        worked = np.bincount(o, minlength=calls) > 0
        span = (last - first)[worked].astype(float)
        cpu = (rows["end"] - rows["start"])[worked].astype(float)
        sync_owner = project(rows, sync_rows["start"], sync_rows["tid"])
        sync_ns = np.bincount(sync_owner[sync_owner >= 0], weights=(sync_rows["end"] - sync_rows["start"])[sync_owner >= 0],
                              minlength=calls)[worked]
        # A starved GPU runs each launch at once: then the range lasts as long as its CPU side.
        mine_kernels = mine & is_kernel
        queued = _median(op_start[mine_kernels] - launches.api_end[mine_kernels]) >= QUEUE_AHEAD_US * 1e3
        wall = span if queued else np.maximum(span, cpu)
        utilization = _median(np.divide(busy[worked], wall, out=np.zeros(len(wall)), where=wall > 0))
        results.append(RangeMetrics(
            name=label,
            calls=calls,
            kernels_per_call=_median(np.bincount(owner[mine_kernels], minlength=calls)[worked]),
            gpu_busy_ms_per_call=_median(busy[worked]) / 1e6,
            gpu_span_ms_per_call=_median(span) / 1e6,
            cpu_ms_per_call=_median(cpu) / 1e6,
            gpu_utilization=utilization,
            launch_api_ms_per_call=_median(np.bincount(o, weights=api_ns[mine], minlength=calls)[worked]) / 1e6,
            syncs_per_call=_median(np.bincount(sync_owner[sync_owner >= 0], minlength=calls)[worked]),
            verdict=verdict(utilization, _median(np.divide(sync_ns, cpu, out=np.zeros(len(cpu)), where=cpu > 0)),
                            queue_ahead=queued),
        ))
        del owner, mine, o, mine_kernels   # not held while the next range's are made
    results.sort(key=lambda r: r.gpu_span_ms_per_call * r.calls, reverse=True)
    return results
