"""Where the host time of each iteration goes: the phases a capture scope keeps or leaves eager.

A graph removes the launch cost of what it captures and nothing else: the host work between
iterations (the next batch, logging), and the phases a scope leaves out (the optimizer step
under a GradScaler, everything but the model for fwd_bwd) still run on the CPU after capture.
The bootstrap marks the phases (``cg-advise:forward``, ``:backward``, ``:optimizer``,
``:module:<child>``); this module measures them per iteration, on the traced run's clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ranges
from .intervals import count_within
from .iterations import outermost, process_rows, project

SMALL_KERNEL_US = 20   # kernels this short are what fusion (torch.compile) can merge away


@dataclass
class Phases:
    """Medians per iteration, milliseconds of CPU time on the traced run's clock."""

    between_iterations_ms: float   # iteration end to the next one's start, host syncs left out
    forward_ms: float              # top-level module calls
    backward_ms: float             # torch.autograd.backward calls
    optimizer_ms: float            # optimizer.step calls (in a trace without the bootstrap's
                                   # ranges: PyTorch's own ranges of step and zero_grad)
    after_backward_ms: float       # from the end of the last backward to the iteration's end (the
                                   # optimizer step with its GradScaler, scheduler and the like)
    submodules_ms: float           # calls of the top-level module's children
    optimizer_ops: float           # GPU operations launched inside optimizer steps
    marked: bool                   # the trace holds the bootstrap's phase ranges
    zero_grad_between_ms: float | None = None   # zero_grad calls between iterations, which a
                                   # full-iteration graph takes in (None: the trace marks none)
    forward_calls: float = 0.0     # top-level forward calls inside the iteration (micro-steps, a
                                   # GAN's discriminator: a graphed callable's cost is per call); 0
                                   # where the trace marks none
    syncs_in_model: float = 0.0    # host syncs inside the forward and backward calls (a model
                                   # that reads a mask on the host): a graph of them captures the
                                   # call, so a replay has no such sync
    syncs_after_backward: float = 0.0   # host syncs from the last backward's end to the
                                   # iteration's end (a GradScaler's inf check, a loss read
                                   # before the step): where the host waits for a graph of the
                                   # forward and backward before it launches the eager step
    syncs_between: float = 0.0     # host syncs from an iteration's end to the next one's start
    before_sync_ms: float | None = None   # host time from an iteration's end to the first sync
                                   # there (None: no iteration has one): what a full-iteration
                                   # graph's GPU work overlaps before that sync waits for it
    forward_ops: float = 0.0       # kernels launched inside the top-level forward calls
    loss_ops: float = 0.0          # kernels the forward's thread launches outside them, from the
                                   # first forward to the first backward (the loss): their backward
                                   # runs eagerly around a graphed forward and backward
    submodules_repeated_ms: float = 0.0   # of submodules_ms, the children called more often than
                                   # the top-level forward (a decoder cell run once per token, a
                                   # layer used twice): a graph of theirs would be overwritten
                                   # before its backward, so the submodule helper runs them eagerly
    prepared_ms: float = 0.0       # the stretch from the first kernel launched after the batch's
                                   # copy to the GPU to the next iteration's start, its zero_grad
                                   # calls and syncs left out: the batch prepared on the GPU
                                   # (augmentation, noise, a mask), which a full-iteration graph
                                   # beginning with it takes in


def _median(values) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.median(values)) if len(values) else 0.0


def _named(trace, rows, names) -> np.ndarray:
    codes = [i for i, name in enumerate(trace.nvtx_names) if name in names]
    return outermost(rows[np.isin(rows["name"], codes)]) if codes else rows[:0]


def _time_in(rows, cpu_a, cpu_b) -> np.ndarray:
    """CPU time of the ranges (outermost) that start in each window."""
    if len(rows) == 0 or len(cpu_a) == 0:
        return np.zeros(len(cpu_a))
    return count_within(rows["start"], cpu_a, cpu_b, rows["end"] - rows["start"]).astype(float)


def measure(trace, global_pid, cpu_windows, iteration_ends, sync_rows, launch_starts, launch_tids,
            optimizer_rows=None, kernel=None, batch_copies=None) -> Phases:
    """Per-iteration phase times; ``iteration_ends`` is where each iteration's range ends
    (the window's end for a whole run), ``launch_*`` the launching calls of the GPU ops;
    ``optimizer_rows``: the optimizer's launches of each step, where the steps were found in
    the kernels (advisor/steps.py) of a trace that marks no phase; ``kernel``: which of the
    launched operations are kernels (not copies or memsets); ``batch_copies``: which are copies
    that may bring a batch to the GPU."""
    cpu_a, cpu_b = cpu_windows
    rows = process_rows(trace, global_pid)
    names = trace.nvtx_names
    children = {n for n in names if n.startswith(ranges.MODULE)}
    phase_rows = {key: _named(trace, rows, wanted) for key, wanted in (
        ("forward", {ranges.FORWARD}), ("backward", {ranges.BACKWARD}), ("optimizer", {ranges.OPTIMIZER}),
        ("submodules", children))}
    marked = bool(len(phase_rows["backward"]) or len(phase_rows["optimizer"]))
    optimizer_until = cpu_b
    if not marked:
        # a torch.profiler trace of the user's own: torch.optim's ranges still say where the
        # optimizer's host time goes, which the scopes that leave it eager keep. Only those
        # inside the iteration ranges: one after a range's end is already time between them
        phase_rows["optimizer"] = _named(trace, rows, {n for n in names
                                                        if n.startswith(ranges.TORCH_OPTIMIZER_PREFIXES)})
        if not len(phase_rows["optimizer"]) and optimizer_rows is not None:
            phase_rows["optimizer"] = optimizer_rows
        optimizer_until = iteration_ends
    per_iteration = {key: _time_in(r, cpu_a, optimizer_until if key == "optimizer" else cpu_b)
                     for key, r in phase_rows.items()}

    # between iterations: the gap after each range but the last, less the time blocked in syncs
    gap = (cpu_b - iteration_ends).astype(float)
    syncs = sync_rows   # runtime rows, in start order
    blocked = (count_within(syncs["start"], iteration_ends, cpu_b, syncs["end"] - syncs["start"]).astype(float)
               if len(syncs) and len(cpu_a) else np.zeros(len(cpu_a)))
    between = np.maximum(gap - blocked, 0.0)[:-1] if len(gap) > 1 else np.zeros(0)
    syncs_between, before_sync = _syncs_between(syncs, iteration_ends, cpu_b)
    zero_grad_between = _zero_grad_between(trace, rows, iteration_ends, cpu_b)

    backward = phase_rows["backward"]
    if len(backward) and len(cpu_a):
        last = np.searchsorted(backward["end"], cpu_b, side="left") - 1   # last backward ending in the window
        ok = (last >= 0) & (backward["end"][np.maximum(last, 0)] >= cpu_a)
        after = np.where(ok, iteration_ends - backward["end"][np.maximum(last, 0)], 0).astype(float)
        after_backward = np.maximum(after, 0.0)
        ended = np.where(ok, backward["end"][np.maximum(last, 0)], iteration_ends)
        syncs_after_backward = (count_within(syncs["start"], ended, iteration_ends).astype(float)
                                if len(syncs) else np.zeros(len(cpu_a)))
    else:
        after_backward = np.zeros(len(cpu_a))
        syncs_after_backward = np.zeros(len(cpu_a))

    model_calls = outermost(np.concatenate([phase_rows["forward"], phase_rows["backward"]]))
    in_model = (project(model_calls, syncs["start"], syncs["tid"]) >= 0) if len(syncs) and len(model_calls) else None
    syncs_in_model = (count_within(syncs["start"][in_model], cpu_a, cpu_b).astype(float) if in_model is not None
                      else np.zeros(len(cpu_a)))

    forward = phase_rows["forward"]
    # counted up to the iteration's end: an evaluation between iterations is not the step's
    forward_calls = (count_within(forward["start"], cpu_a, iteration_ends).astype(float)
                     if len(forward) and len(cpu_a) else np.zeros(len(cpu_a)))
    optimizer = phase_rows["optimizer"]
    if len(optimizer):
        inside = project(optimizer, launch_starts, launch_tids) >= 0   # push/pop: the step's own thread
        optimizer_ops = count_within(np.sort(launch_starts[inside]), cpu_a, optimizer_until).astype(float)
    else:
        optimizer_ops = np.zeros(len(cpu_a))
    forward_ops, loss_ops = _model_and_loss_ops(forward, backward, launch_starts, launch_tids, kernel, cpu_a, cpu_b)
    return Phases(
        between_iterations_ms=_median(between) / 1e6,
        forward_ms=_median(per_iteration["forward"]) / 1e6,
        backward_ms=_median(per_iteration["backward"]) / 1e6,
        optimizer_ms=_median(per_iteration["optimizer"]) / 1e6,
        after_backward_ms=_median(after_backward) / 1e6,
        submodules_ms=_median(per_iteration["submodules"]) / 1e6,
        optimizer_ops=_median(optimizer_ops),
        marked=marked,
        zero_grad_between_ms=_median(zero_grad_between) / 1e6 if zero_grad_between is not None else None,
        forward_calls=_median(forward_calls),
        syncs_in_model=_median(syncs_in_model),
        syncs_after_backward=_median(syncs_after_backward),
        syncs_between=_median(syncs_between),
        before_sync_ms=_median(before_sync) / 1e6 if len(before_sync) else None,
        forward_ops=_median(forward_ops),
        loss_ops=_median(loss_ops),
        submodules_repeated_ms=_repeated_children_ms(trace, rows, children, cpu_a, cpu_b, forward_calls),
        prepared_ms=_median(_prepared(forward, launch_starts, launch_tids, kernel, batch_copies, iteration_ends, cpu_b,
                                      _left_out(trace, rows, syncs))) / 1e6,
    )


def _repeated_children_ms(trace, rows, children, cpu_a, cpu_b, forward_calls) -> float:
    """The median host time per iteration of the top-level module's children that are called
    more often in an iteration than the module itself (its forward calls; once where the trace
    marks none): each such child's range counted by name."""
    if not len(cpu_a):
        return 0.0
    per_call = max(_median(forward_calls), 1.0)
    total = np.zeros(len(cpu_a))
    child_rows = rows[np.isin(rows["name"], [i for i, name in enumerate(trace.nvtx_names) if name in children])]
    for code in np.unique(child_rows["name"]):   # each child's ranges, outermost by its own name
        calls = outermost(child_rows[child_rows["name"] == code])
        if _median(count_within(calls["start"], cpu_a, cpu_b)) > per_call:
            total += _time_in(calls, cpu_a, cpu_b)
    return _median(total) / 1e6


def _model_and_loss_ops(forward, backward, launch_starts, launch_tids, kernel, cpu_a, cpu_b) -> tuple:
    """Per iteration, the kernels launched inside the top-level forward calls, and those the
    forward's thread launches outside them from the iteration's first forward to its first
    backward: the loss (a VAE's reconstruction and KL terms, a perceptual loss's Gram matrices).
    Graphed callables and compile take in the model's forward and backward; the loss and its
    backward stay eager, autograd launching the latter around the graphed backward."""
    zeros = np.zeros(len(cpu_a))
    if kernel is None or not len(forward) or not len(cpu_a):
        return zeros, zeros
    starts, tids = launch_starts[kernel], launch_tids[kernel]
    inside = project(forward, starts, tids) >= 0
    forward_ops = count_within(np.sort(starts[inside]), cpu_a, cpu_b).astype(float)
    if not len(backward):
        return forward_ops, zeros
    main = _main_thread(forward)
    outside = np.sort(starts[~inside & (tids == main)])
    first_forward = _first_start(forward, cpu_a, cpu_b)
    first_backward = _first_start(backward, cpu_a, cpu_b)
    valid = first_forward < first_backward   # both found (else inf), the forward first
    loss_ops = np.where(valid, count_within(outside, np.where(valid, first_forward, 0),
                                            np.where(valid, first_backward, 0)), 0).astype(float)
    return forward_ops, loss_ops


def _prepared(forward, launch_starts, launch_tids, kernel, copies, iteration_ends, next_starts, left_out) -> np.ndarray:
    """Per iteration but the last, the host time from the first kernel that the model's thread
    launches after the gap's last copy to the GPU (``copies``) to the next iteration's start,
    less the time in ``left_out`` ranges starting there (zero_grad calls, counted apart, and
    syncs, which the time between iterations leaves out): FixMatch's augmentation after
    ``.to(device)``. 0 where the gap copies nothing to the GPU: a batch already there leaves no
    mark between what follows the step (DDPM's EMA update, eager under any graph) and what
    prepares the next batch (its noise, which a full-iteration graph takes in); a logged loss's
    copy back is no such mark."""
    ends, starts = iteration_ends[:-1], next_starts[:-1]
    if kernel is None or copies is None or not len(forward) or not len(ends):
        return np.zeros(len(ends))
    main = launch_tids == _main_thread(forward)
    kernels, copied = np.sort(launch_starts[kernel & main]), np.sort(launch_starts[copies & main])
    if not len(copied) or not len(kernels):
        return np.zeros(len(ends))
    last = np.searchsorted(copied, starts, side="left") - 1   # the gap's last copy, if it has one
    anchor = copied[np.maximum(last, 0)]
    in_gap = (last >= 0) & (anchor >= ends)
    first = np.minimum(np.searchsorted(kernels, anchor, side="right"), len(kernels) - 1)
    found = in_gap & (kernels[first] > anchor) & (kernels[first] < starts)
    begin = np.where(found, kernels[first], starts)
    out = count_within(left_out["start"], begin, starts, left_out["end"] - left_out["start"]) if len(left_out) else 0
    return np.maximum(np.where(found, starts - begin, 0) - out, 0).astype(float)


def _main_thread(forward):
    """The thread that calls the model: the one with most top-level forward ranges."""
    values, counts = np.unique(forward["tid"], return_counts=True)
    return values[np.argmax(counts)]


def _first_start(rows, cpu_a, cpu_b) -> np.ndarray:
    """The start of the first of ``rows`` (sorted) starting in each window, inf where none does."""
    index = np.searchsorted(rows["start"], cpu_a, side="left")
    clipped = np.minimum(index, len(rows) - 1)
    found = (index < len(rows)) & (rows["start"][clipped] < cpu_b)
    return np.where(found, rows["start"][clipped], np.inf)


def _syncs_between(syncs, iteration_ends, next_starts) -> tuple:
    """Per iteration but the last, the host syncs between its end and the next one's start,
    and, for those that have one, the host time up to the first: the EMA update, the logging
    and the next batch's Python before a pageable batch's copy waits for the GPU. Under a
    full-iteration graph that host work overlaps the replay's GPU work; the sync then waits
    only for what is left of it."""
    ends, starts = iteration_ends[:-1], next_starts[:-1]
    if not len(syncs) or not len(ends):
        return np.zeros(len(ends)), np.zeros(0)
    counts = count_within(syncs["start"], ends, starts)
    first = np.searchsorted(syncs["start"], ends, side="left")
    has = counts > 0
    return counts.astype(float), (syncs["start"][first[has]] - ends[has]).astype(float)


def _left_out(trace, rows, syncs) -> np.ndarray:
    """The zero_grad ranges (outermost) and the syncs, in one array of start and end, by start."""
    wanted = _zero_grad_names(trace)
    zero_grad = _named(trace, rows, wanted) if wanted else rows[:0]
    spans = np.zeros(len(zero_grad) + len(syncs), dtype=[("start", "i8"), ("end", "i8")])
    spans["start"] = np.concatenate([zero_grad["start"], syncs["start"]])
    spans["end"] = np.concatenate([zero_grad["end"], syncs["end"]])
    return np.sort(spans, order="start")


def _zero_grad_names(trace) -> set:
    """The ranges of zero_grad calls: the bootstrap's, else torch.optim's own (empty: neither)."""
    names = trace.nvtx_names
    return {ranges.ZERO_GRAD} & set(names) or {n for n in names if n.startswith(ranges.TORCH_ZERO_GRAD_PREFIX)}


def _zero_grad_between(trace, rows, iteration_ends, next_starts):
    """Per iteration but the last, the time in zero_grad calls between its end and the next
    one's start: the bootstrap's ranges, else torch.optim's own (any torch.profiler trace);
    None where the trace has neither, so that no call is taken for none."""
    wanted = _zero_grad_names(trace)
    if not wanted or len(iteration_ends) < 2:
        return None
    return _time_in(_named(trace, rows, wanted), iteration_ends, next_starts)[:-1]


def small_kernel_share(durations_ns: np.ndarray) -> float:
    """Share of kernel time in kernels under SMALL_KERNEL_US: the elementwise and small
    reductions that fusion merges; what compile can win beyond removing launch gaps."""
    return share_of(durations_ns, durations_ns < SMALL_KERNEL_US * 1e3)


def share_of(durations_ns: np.ndarray, chosen: np.ndarray) -> float:
    """The share of the kernels' time in the ``chosen`` ones (0 without kernel time)."""
    total = float(durations_ns.sum())
    return float(durations_ns[chosen].sum()) / total if total else 0.0
