"""Whether ranges a trace repeats are one training step each, read from the kernels launched
inside them. Other people's exports carry their own NVTX ranges: a range an epoch also repeats
and launches most of the GPU work, and taken as the iterations it made a prediction per epoch
(4 "iterations" of 40 steps each, 8.42x predicted); a range an operator or a micro-batch
repeats several times a step cuts the step in pieces. Either way the window is not an
iteration, and no prediction may come from it.

Two signs, each independent of the ranges' names:

- several steps in a range: its kernels, in launch order, hold the same sequence three times
  or more back to back, covering most of the range, and that sequence is a training step: it
  holds the optimizer's multi-tensor kernels (torch.optim's foreach and fused steps, apex's,
  DeepSpeed's), or, in a loop without them (a hand-written update), launches from two threads
  (the forward from Python's, the backward from autograd's). A layer repeated in a forward,
  or a micro-batch repeated before one optimizer step, is a repeat that is not a step.
- pieces of a step: the process steps an optimizer, but most windows from one range to the
  next hold none of its kernels (nor a graph launch, which may hold the step).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

MIN_REPEATS = 3         # the same step this often back to back: the range holds several
MIN_COVER = 0.5         # ... over at least this share of the range's kernels
MAX_CANDIDATES = 24     # kernel names tried as a step's boundary, rarest first
SAMPLED_RANGES = 16     # ranges read (evenly spread): a run of 10,000 steps is not read range by range
MIN_STEP_SHARE = 0.4    # windows holding an optimizer kernel, at least, where the process has one


def holds_several_steps(names: np.ndarray, tids: np.ndarray, optimizer: np.ndarray) -> bool:
    """One range's kernels in launch order (short-name ids, the launching thread, whether each
    is an optimizer kernel): do they repeat one training step MIN_REPEATS times or more? Each
    name that occurs often enough cuts the sequence at its occurrences; the most frequent
    piece, repeated, must cover MIN_COVER of the range and be a step (see the module)."""
    n = len(names)
    if n < 2 * MIN_REPEATS:
        return False
    any_optimizer = bool(optimizer.any())
    ids, counts = np.unique(names, return_counts=True)
    order = np.argsort(counts, kind="stable")
    tried = 0
    for name in ids[order][counts[order] > MIN_REPEATS]:
        if tried == MAX_CANDIDATES:
            break
        tried += 1
        at = np.flatnonzero(names == name)
        pieces = Counter(names[a:b].tobytes() for a, b in zip(at[:-1], at[1:]))
        piece, repeats = pieces.most_common(1)[0]
        length = len(piece) // names.itemsize
        if repeats < MIN_REPEATS or repeats * length < MIN_COVER * n:
            continue
        first = next(a for a, b in zip(at[:-1], at[1:]) if names[a:b].tobytes() == piece)
        span = slice(first, first + length)
        if any_optimizer:   # a step launches the optimizer's kernels and others (an optimizer's own repeat is not one)
            if optimizer[span].any() and not optimizer[span].all():
                return True
        elif len(np.unique(tids[span])) > 1:
            return True
    return False


def range_shape(starts: np.ndarray, ends: np.ndarray, launch_at: np.ndarray, names: np.ndarray,
                tids: np.ndarray, optimizer: np.ndarray, graphs_at: np.ndarray) -> str | None:
    """Why ranges (``starts``/``ends``, sorted, not overlapping) are not one training step each,
    or None. The kernels are given by their launch time (sorted), name id, thread and whether
    each is an optimizer kernel; a kernel belongs to a range when it was launched within it,
    from any thread (autograd launches the backward from its own). ``graphs_at``: the graph
    launches' times, sorted."""
    if len(starts) < 2 or len(launch_at) == 0:
        return None
    sampled = np.unique(np.linspace(0, len(starts) - 1, min(SAMPLED_RANGES, len(starts))).astype(int))
    several = 0
    for i in sampled:
        lo, hi = np.searchsorted(launch_at, [starts[i], ends[i]])
        several += holds_several_steps(names[lo:hi], tids[lo:hi], optimizer[lo:hi])
    if several * 2 > len(sampled):
        return "each range holds several training steps"
    stepped = launch_at[optimizer]
    inside = stepped[(stepped >= starts[0]) & (stepped < starts[-1])]
    if len(inside):
        inside = np.concatenate([inside, graphs_at[(graphs_at >= starts[0]) & (graphs_at < starts[-1])]])
        window = np.searchsorted(starts, inside, side="right") - 1
        share = len(np.unique(window)) / (len(starts) - 1)
        if share < MIN_STEP_SHARE:
            return f"only {share:.0%} of the spans from one range to the next step the optimizer: pieces of a step"
    return None
