"""Finds the iterations of a run: the NVTX ranges that mark one training (or inference) step."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from . import ranges
from .errors import TraceError
from .intervals import assign
from .steps import KernelSequence
from .trace import NVTX_PUSH_POP, PID_MASK, Trace


DIGITS = re.compile(r"\d+")  # "iteration 12" -> "iteration #": numbered ranges are one group


def masked_labels(trace: Trace) -> np.ndarray:
    """Each NVTX name with its numbers masked, indexed like trace.nvtx_names."""
    return np.array([DIGITS.sub("#", name) for name in trace.nvtx_names], dtype=object)


MIN_GPU_SHARE = 0.5   # a repeated range is taken as the iterations only if it launches this share of GPU time
MAX_CANDIDATES = 20   # repeated ranges tried, by time covered


@dataclass
class IterationRanges:
    """The CPU-side ranges of one process chosen as its iterations (outermost, sorted)."""

    source: str            # how they were chosen, for the report
    names: list            # NVTX names that matched
    rows: np.ndarray       # NVTX_DTYPE rows, sorted by start, none nested in another
    considered: list = field(default_factory=list)   # [{"range", "gpu_share"}] of the candidates looked at
    optimizer_rows: Optional[np.ndarray] = None   # found in the kernels: each step's optimizer launches


def outermost(rows: np.ndarray) -> np.ndarray:
    """Drops ranges that start inside an earlier kept range (nested or overlapping)."""
    if len(rows) == 0:
        return rows
    rows = rows[np.argsort(rows["start"], kind="stable")]
    reach = np.maximum.accumulate(rows["end"])
    keep = np.ones(len(rows), bool)
    keep[1:] = rows["start"][1:] >= reach[:-1]
    return rows[keep]


def top_level_mask(rows: np.ndarray) -> np.ndarray:
    """True for ranges not inside another range of the same thread."""
    top = np.ones(len(rows), bool)
    for tid in np.unique(rows["tid"]):
        idx = np.flatnonzero(rows["tid"] == tid)
        idx = idx[np.argsort(rows["start"][idx], kind="stable")]
        reach = np.maximum.accumulate(rows["end"][idx])
        top[idx[1:]] = rows["start"][idx[1:]] >= reach[:-1]
    return top


def process_rows(trace: Trace, global_pid: int) -> np.ndarray:
    return trace.nvtx[(trace.nvtx["tid"] & PID_MASK) == global_pid]


def find_iterations(trace: Trace, global_pid: int, pattern: str | None,
                    gpu_share: Optional[Callable[[np.ndarray], float]] = None,
                    kernels: Optional[KernelSequence] = None) -> IterationRanges | None:
    """Iteration ranges of one process: by ``pattern``, else cg-advise's, else the repeated
    range that covers the most time among those that launch most of the GPU work
    (``gpu_share(rows)``: a range of parameter copies at start-up covers time but no kernel) and
    that are one training step each (``kernels.not_a_step(rows)`` says why not: an epoch's range
    holds several, an operator's is a piece of one; advisor/steps.py). Top-level ranges are
    tried first, then ranges nested in others (a step's range inside an epoch's, or inside one
    range around the whole loop); where none is one step, or the trace has no range, the
    training step its kernels repeat (``kernels.repeated_steps()``). None, or no rows, means the
    whole run is one window."""
    rows = process_rows(trace, global_pid)
    names = trace.nvtx_names
    if pattern is not None:
        regex = re.compile(pattern)
        codes = [i for i, name in enumerate(names) if regex.search(name)]
        chosen = rows[np.isin(rows["name"], codes)]
        if len(chosen) == 0:
            return None
        return IterationRanges(f"--iteration-range {pattern!r}", sorted({names[c] for c in chosen["name"]}),
                               outermost(chosen))
    for name in ranges.DEFAULT_ITERATION_NAMES:
        if name in names:
            chosen = rows[rows["name"] == names.index(name)]
            if len(chosen):
                return IterationRanges(f"injected range {name!r}", [name], outermost(chosen))
    considered = []
    top = top_level_mask(rows)
    labels = masked_labels(trace)
    for level, label in ((rows[top], "top-level"), (rows[~top], "nested")):
        for chosen, group in _repeated_groups(labels, level):
            share = gpu_share(chosen) if gpu_share is not None else 1.0
            considered.append({"range": group, "gpu_share": float(share)})
            if share < MIN_GPU_SHARE:
                continue
            why = kernels.not_a_step(chosen) if kernels is not None else None
            if why:
                considered[-1]["not_iterations"] = why
                continue
            return IterationRanges(f"repeated {label} range {group!r}", sorted({names[c] for c in chosen["name"]}),
                                   chosen, considered)
    found = kernels.repeated_steps() if kernels is not None else None
    if found is not None:
        return IterationRanges(found.source, [], found.rows, considered, found.optimizer_rows)
    return IterationRanges("", [], rows[:0], considered) if considered else None


def _repeated_groups(masked: np.ndarray, rows: np.ndarray):
    """(ranges, masked name) of each name that repeats, by the time its ranges cover, most first
    (MAX_CANDIDATES at most); the ranges outermost, sorted. ``masked``: masked_labels."""
    if len(rows) == 0:
        return
    labels = masked[rows["name"]]
    unique, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    totals = np.bincount(inverse, weights=rows["end"] - rows["start"], minlength=len(unique))
    for group in np.argsort(-totals, kind="stable")[:MAX_CANDIDATES]:
        if counts[group] >= 2:
            yield outermost(rows[inverse == group]), str(unique[group])


def project(rows: np.ndarray, times: np.ndarray, tids: np.ndarray, order=None) -> np.ndarray:
    """Index of the range (rows sorted, non-overlapping) each call lies in; push/pop ranges
    take calls of their own thread only, start/end ranges any thread of the process.
    ``order``: an argsort of ``times``, where the caller has one (see assign)."""
    idx = assign(times, rows["start"], rows["end"], order)
    push_pop = rows["event_type"] == NVTX_PUSH_POP
    if not push_pop.any():
        return idx
    at = np.where(idx >= 0, idx, len(rows))   # the range, or one past the last for none
    wrong_thread = np.append(push_pop, False)[at] & (np.append(rows["tid"], 0)[at] != tids)
    idx[wrong_thread] = -1
    return idx


def check_pattern(trace: Trace, pattern: str) -> None:
    """An --iteration-range that is not a regex, or matches no range at all, is bad input."""
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise TraceError(f"--iteration-range {pattern!r} is not a valid regular expression ({error})") from None
    if not any(regex.search(name) for name in trace.nvtx_names):
        shown = ", ".join(repr(n) for n in trace.nvtx_names[:8]) or "none"
        raise TraceError(f"--iteration-range {pattern!r} matches no NVTX range in {trace.path.name} "
                         f"(ranges found: {shown})")
