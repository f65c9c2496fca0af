"""Training steps read off the kernels a process launches. Other people's exports carry their
own NVTX ranges, or none: a range an epoch repeats also launches most of the GPU work, and
taken as the iterations it made a prediction per epoch (4 "iterations" of 40 steps each, 8.42x
predicted); a range an operator or a micro-batch repeats several times a step cuts the step in
pieces. Either way the window is not an iteration, and no prediction may come from it. A plain
export has no range at all, and its steps are still there in its kernels.

- A repeated training step (``repeated_step``): the shortest stretch of kernels (in launch
  order) that the sequence repeats back to back over most of its length, cut where a kernel
  that occurs once a step is launched, and that is a step: it launches a graph, or the
  optimizer's multi-tensor kernels and others (torch.optim's foreach and fused steps, apex's,
  DeepSpeed's), or, in a loop without them (a hand-written update), launches from two threads
  (the forward from Python's, the backward from autograd's); where the sequence launches from
  two threads, a step does too. A layer repeated in a forward, a micro-batch repeated before
  one optimizer step, or an optimizer stepped layer by layer from gradient hooks repeats
  without being a step.
- Several steps in a range: the range's kernels repeat a step (three steps or more).
- Pieces of a step: the process steps an optimizer, but most windows from one range to the
  next hold none of its kernels (nor a graph launch, which may hold the step).
- The iterations of a run whose ranges are not one step each, or that has none: its repeated
  step, five times or more (``KernelSequence.repeated_steps``).

What it cannot tell: an inference loop's repeated forward from a layer repeated inside one
(both one thread, no optimizer), so an inference run without ranges stays one window; a
hand-written update's micro-batches from its steps; steps whose kernels differ from one to
the next (shapes that change the kernels chosen).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .trace import NVTX_DTYPE, NVTX_START_END, OP_GRAPH, OP_KERNEL

MIN_REPEATS = 2         # the same step this often back to back (three steps, cut where each begins): several
MIN_COVER = 0.5         # ... over at least this share of the range's kernels
SAMPLED_RANGES = 16     # ranges read (evenly spread): a run of 10,000 steps is not read range by range
MIN_STEP_SHARE = 0.4    # windows holding an optimizer kernel, at least, where the process has one
MIN_FOUND_STEPS = 5     # steps a run without iteration ranges must repeat for them to be its iterations


@dataclass
class RepeatedStep:
    """A training step a kernel sequence repeats: where each repeat starts and ends (indexes
    into the sequence, ``ends`` exclusive) and how many kernels it has."""

    starts: np.ndarray
    ends: np.ndarray
    kernels: int


class _Pieces:
    """Fingerprints of any stretch of a kernel sequence in O(1): its length, a sum of random
    64-bit weights of its names and the same weighted by position (so that order counts), all
    modulo 2**64 from prefix sums. A million kernels are cut at a name's occurrences with a
    few array operations, not a copy of each stretch."""

    def __init__(self, codes: np.ndarray):
        """``codes``: the names as small integers (0 to the number of names)."""
        weights = np.random.default_rng(0).integers(1, 2**63, size=int(codes.max()) + 1, dtype=np.uint64)
        w = weights[codes]
        with np.errstate(over="ignore"):
            self.sums = np.concatenate([[np.uint64(0)], np.cumsum(w, dtype=np.uint64)])
            self.moments = np.concatenate([[np.uint64(0)], np.cumsum(w * np.arange(len(w), dtype=np.uint64),
                                                                      dtype=np.uint64)])

    def keys(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = a.astype(np.uint64), b.astype(np.uint64)
        with np.errstate(over="ignore"):
            total = self.sums[b] - self.sums[a]
            ordered = self.moments[b] - self.moments[a] - a * total
            return (b - a) * np.uint64(0x9E3779B97F4A7C15) + total * np.uint64(0xC2B2AE3D27D4EB4F) + ordered


def repeated_step(names: np.ndarray, tids: np.ndarray, optimizer: np.ndarray, min_repeats: int) -> RepeatedStep | None:
    """The shortest training step that a kernel sequence (launch order: short-name ids, the
    launching threads, whether each is an optimizer kernel) repeats at least ``min_repeats``
    times back to back, over MIN_COVER of it; None if there is none.

    The candidates are the periods at which the sequence matches itself for at least MIN_COVER
    of its kernels (``_periods``), shortest first among those that match nearly as well as the
    best. For each, a kernel (or a pair of kernels in a row) that occurs once in one period cuts
    the whole sequence at its occurrences; the most frequent piece must cover MIN_COVER, come
    ``min_repeats`` times in a row somewhere, and be a step (``_is_step``). A layer repeated in
    a forward, or a micro-batch repeated before one optimizer step, repeats without being a
    step; an epoch of steps is a longer period than its step."""
    n = len(names)
    if n < 2 * min_repeats:
        return None
    _, codes = np.unique(names, return_inverse=True)
    codes = codes.ravel().astype(np.int64)
    graph = names == GRAPH_LAUNCH
    any_optimizer = bool(optimizer.any())
    several_threads = len(np.unique(tids)) > 1
    pieces = None
    for period, at in _periods(codes, min_repeats):
        piece = codes[at:at + period]
        cuts = _anchor_occurrences(codes, piece)
        if cuts is None or len(cuts) <= min_repeats:
            continue
        pieces = pieces or _Pieces(codes)
        a, b = cuts[:-1], cuts[1:]
        keys = pieces.keys(a, b)
        values, repeats = np.unique(keys, return_counts=True)
        modal = keys == values[repeats.argmax()]
        length = int((b - a)[modal][0])
        if modal.sum() * length < MIN_COVER * n or _longest_run(modal) < min_repeats:
            continue
        span = slice(int(a[modal][0]), int(a[modal][0]) + length)
        if _is_step(span, optimizer, graph, tids, any_optimizer, several_threads):
            return RepeatedStep(a[modal], b[modal], length)
    return None


MAX_PERIOD_SAMPLE = 1 << 18   # kernels read for the periods (the middle of a longer run): a step of
                              # more than 52,000 kernels (a fifth of that) is not looked for
MAX_PERIODS = 32              # candidate periods tried, shortest first
PERIOD_MATCH_SLACK = 0.25     # a period is tried if it matches this close to the best one's share


def _periods(codes: np.ndarray, min_repeats: int):
    """(period, where a stretch of one period starts that the next period repeats) for each
    lag at which the sequence matches itself (kernel i's name is kernel i + lag's) for at least
    MIN_COVER of its kernels, local peaks only. The matches of every lag at
    once, from the autocorrelation of each name's random phase (an FFT): a lag's sum is its
    matches plus noise of the order of the square root of the length."""
    offset = max(0, (len(codes) - MAX_PERIOD_SAMPLE) // 2)
    codes = codes[offset:offset + MAX_PERIOD_SAMPLE]
    n = len(codes)
    phases = np.exp(2j * np.pi * np.random.default_rng(0).random(int(codes.max()) + 1)).astype(np.complex64)
    spectrum = np.fft.fft(phases[codes], 2 * n)
    matches = np.fft.ifft(spectrum * np.conj(spectrum))[:n].real
    share = np.zeros(n + 1)
    share[1:n] = matches[1:] / (n - np.arange(1, n))
    lags = np.arange(1, n // min_repeats + 1)
    top = share[lags] + 1e-6   # float noise: equal neighbours are both peaks
    peaks = lags[(share[lags] >= MIN_COVER) & (top >= share[lags - 1]) & (top >= share[lags + 1])]
    # shortest first among those that match nearly as well as the best: a step's period matches
    # all but the kernels of the steps that differ (the first one's set-up, an evaluation), an
    # epoch's all (taken first, an epoch of steps would be the iteration); kernels that
    # alternate inside a step match at short periods for fewer of them (a layer repeated
    # matches for many, and is no step: repeated_step goes on to the next period)
    if len(peaks):
        peaks = peaks[share[peaks] >= share[peaks].max() - PERIOD_MATCH_SLACK]
    for lag in peaks[:MAX_PERIODS]:
        run = _longest_run_start(codes[:-lag] == codes[lag:], lag)
        if run is not None:
            yield int(lag), offset + run


def _runs(mask: np.ndarray) -> tuple:
    """(starts, ends) of each stretch of True values in a boolean array, ends exclusive."""
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _longest_run_start(mask: np.ndarray, length: int) -> int | None:
    """Where the longest stretch of True values starts, if it is ``length`` long or more; else
    None. The longest: the steps, not a run's set-up that repeats one kernel (a data set drawn
    with randn, batch by batch, before the loop)."""
    starts, ends = _runs(mask)
    if not len(starts):
        return None
    longest = int(np.argmax(ends - starts))
    return int(starts[longest]) if ends[longest] - starts[longest] >= length else None


def _anchor_occurrences(codes: np.ndarray, piece: np.ndarray) -> np.ndarray | None:
    """Where in the whole sequence a kernel that occurs once in ``piece`` (one period) occurs,
    or, where every kernel occurs more than once in it, a pair of kernels in a row that occurs
    once; None if neither does (the cut would not fall once a step)."""
    values, counts = np.unique(piece, return_counts=True)
    once = values[counts == 1]
    if len(once):
        return np.flatnonzero(codes == once[0])
    width = int(codes.max()) + 1
    pairs = piece[:-1] * width + piece[1:]
    values, counts = np.unique(pairs, return_counts=True)
    once = values[counts == 1]
    if not len(once):
        return None
    return np.flatnonzero(codes[:-1] * width + codes[1:] == once[0])


GRAPH_LAUNCH = -1   # the name KernelSequence gives a graph launch (a graph-level trace shows no kernel in it)


def _is_step(span: slice, optimizer: np.ndarray, graph: np.ndarray, tids: np.ndarray, any_optimizer: bool,
             several_threads: bool) -> bool:
    """Whether one repeated piece is a training step: it launches a graph, or the optimizer's
    kernels and others (an optimizer's own repeated kernel is no step); without an optimizer in
    the sequence (a hand-written update), launches from two threads. And where the sequence
    launches from two threads, a step's kernels do too (Python's forward, autograd's
    backward): an optimizer stepped layer by layer from gradient hooks repeats a piece of the
    backward alone."""
    if graph[span].any():
        return True
    two_threads = len(np.unique(tids[span])) > 1
    if not any_optimizer:
        return two_threads
    return bool(optimizer[span].any() and not optimizer[span].all()) and (two_threads or not several_threads)


def _longest_run(mask: np.ndarray) -> int:
    """The length of the longest stretch of True in a boolean array."""
    starts, ends = _runs(mask)
    return int((ends - starts).max()) if len(starts) else 0


def holds_several_steps(names: np.ndarray, tids: np.ndarray, optimizer: np.ndarray) -> bool:
    """One range's kernels in launch order: do they repeat one training step back to back,
    MIN_REPEATS times between the kernels that begin three of them (``repeated_step``)?"""
    return repeated_step(names, tids, optimizer, MIN_REPEATS) is not None


def range_shape(starts: np.ndarray, ends: np.ndarray, launch_at: np.ndarray, names: np.ndarray,
                tids: np.ndarray, optimizer: np.ndarray) -> str | None:
    """Why ranges (``starts``/``ends``, sorted, not overlapping) are not one training step each,
    or None. The kernels (graph launches among them, named GRAPH_LAUNCH) are given by their
    launch time (sorted), name id, thread and whether each is an optimizer kernel; a kernel
    belongs to a range when it was launched within it, from any thread (autograd launches the
    backward from its own)."""
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
        graphs_at = launch_at[names == GRAPH_LAUNCH]
        inside = np.concatenate([inside, graphs_at[(graphs_at >= starts[0]) & (graphs_at < starts[-1])]])
        window = np.searchsorted(starts, inside, side="right") - 1
        share = len(np.unique(window)) / (len(starts) - 1)
        if share < MIN_STEP_SHARE:
            return f"only {share:.0%} of the spans from one range to the next step the optimizer: pieces of a step"
    return None


class KernelSequence:
    """One process's kernels on one GPU in launch order, for find_iterations: why ranges are not
    one step each (``not_a_step``), and the steps of a run whose ranges mark none
    (``repeated_steps``). ``launches``: each op's launching call (advisor.metrics's _Launches:
    ``index``, ``api_start``, ``api_end``, ``api_tid``). The arrays are made on first use: a
    trace with cg-advise's own ranges never needs them."""

    def __init__(self, ops: np.ndarray, launches, optimizer_names: np.ndarray):
        self._ops, self._launches, self._optimizer_names = ops, launches, optimizer_names

    @cached_property
    def _arrays(self) -> dict:
        ops, launches = self._ops, self._launches
        found = launches.index >= 0
        graph = ops["kind"] == OP_GRAPH
        launched = np.flatnonzero(((ops["kind"] == OP_KERNEL) | graph) & found)
        launched = launched[np.argsort(launches.api_start[launched], kind="stable")]
        names = np.where(graph[launched], GRAPH_LAUNCH, ops["name"][launched].astype(np.int64))
        return {"at": launches.api_start[launched], "end": launches.api_end[launched], "names": names,
                "tids": launches.api_tid[launched], "optimizer": np.isin(names, self._optimizer_names)}

    def not_a_step(self, rows: np.ndarray) -> str | None:
        k = self._arrays
        return range_shape(rows["start"], rows["end"], k["at"], k["names"], k["tids"], k["optimizer"])

    def repeated_steps(self) -> FoundSteps | None:
        """The shortest training step the kernels repeat MIN_FOUND_STEPS times or more, as
        ranges (NVTX_DTYPE; start/end: any thread's launches count) from its first launch to
        the end of its last, each step begun where one iteration ends (``_boundary``: after
        its optimizer's last kernel), so that the host work between steps (the next batch, the
        loop) falls between the ranges as it does between the bootstrap's iteration ranges;
        and its optimizer's launches, first to last, as a phase of its own. None where no such
        step repeats (an inference loop, a run of one or two steps, a loop whose every step
        differs)."""
        k = self._arrays
        found = repeated_step(k["names"], k["tids"], k["optimizer"], MIN_FOUND_STEPS)
        if found is None or len(found.starts) < MIN_FOUND_STEPS:
            return None
        starts, length = found.starts, found.kernels
        shift = self._boundary(starts, length)
        if shift:   # a step from the boundary in one piece to the same place in the next
            starts = starts[np.isin(found.ends, found.starts)] + shift
        ends = starts + length
        rows = _ranges(k["at"][starts], k["end"][ends - 1], k["tids"][starts])
        in_step = np.flatnonzero(k["optimizer"][starts[0]:ends[0]])
        # the optimizer's host time: from the launch before its first kernel (its Python runs
        # before that kernel) to its last
        optimizer = (_ranges(k["end"][starts + in_step[0] - 1], k["end"][starts + in_step[-1]], k["tids"][starts])
                     if len(in_step) and in_step[0] > 0 else None)
        return FoundSteps(rows, optimizer, f"a training step its kernels repeat ({length} kernels, {len(rows)} times alike)")

    def _boundary(self, starts: np.ndarray, length: int) -> int:
        """Where in the step (an offset from its cut) one iteration ends and the next begins:
        right after its optimizer's last kernel (a GradScaler's update included), where the
        loop goes on to the next batch; in a step without one (a hand-written update), where
        the host waits longest before a launch, the median over up to 64 of its repeats."""
        k = self._arrays
        step_optimizer = np.flatnonzero(k["optimizer"][starts[0]:starts[0] + length])
        if len(step_optimizer):
            return int(step_optimizer[-1] + 1) % length
        sample = starts[starts > 0][:: max(1, len(starts) // 64)][:64]
        if not len(sample) or length < 2:
            return 0
        at = sample[:, None] + np.arange(length)[None, :]
        waits = k["at"][at] - k["end"][at - 1]
        return int(np.argmax(np.median(waits, axis=0)))


@dataclass
class FoundSteps:
    """A run's iterations found in its kernels: the steps' ranges, their optimizer's (None
    without optimizer kernels), and what they are, for the report."""

    rows: np.ndarray
    optimizer_rows: np.ndarray | None
    source: str


def _ranges(starts: np.ndarray, ends: np.ndarray, tids: np.ndarray) -> np.ndarray:
    rows = np.zeros(len(starts), NVTX_DTYPE)
    rows["start"], rows["end"], rows["tid"], rows["event_type"], rows["name"] = starts, ends, tids, NVTX_START_END, -1
    return rows
