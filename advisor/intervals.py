"""Vectorised interval arithmetic: union of overlapping GPU intervals, gaps, busy time per window."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def in_order(keys: np.ndarray) -> bool:
    """Are the keys already sorted? Exports mostly are, and a check costs far less than a sort."""
    return len(keys) < 2 or bool(np.all(keys[1:] >= keys[:-1]))


@dataclass
class Union:
    """Disjoint, sorted busy intervals; their cumulative length answers window queries fast."""

    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def of(cls, starts: np.ndarray, ends: np.ndarray) -> "Union":
        """Merges intervals given sorted by start (streams overlap: the union, not the sum)."""
        if len(starts) == 0:
            return cls(np.empty(0, np.int64), np.empty(0, np.int64))
        reach = np.maximum.accumulate(ends)
        first = np.empty(len(starts) + 1, bool)   # each run's first interval, and one past the last
        first[0] = first[-1] = True
        np.greater(starts[1:], reach[:-1], out=first[1:-1])
        # an interval's reach is its run's largest end so far: at the run's last one, the run's end
        return cls(starts[first[:-1]], reach[first[1:]])

    @property
    def total(self) -> int:
        return int((self.ends - self.starts).sum())

    def gaps(self):
        """(start, length) of each idle gap between busy intervals."""
        return self.ends[:-1], self.starts[1:] - self.ends[:-1]

    def busy_before(self, t: np.ndarray) -> np.ndarray:
        """Busy time in (-inf, t) for each t."""
        t = np.asarray(t, np.int64)
        cumulative = np.concatenate([[0], np.cumsum(self.ends - self.starts)])
        k = np.searchsorted(self.starts, t, side="right")  # intervals starting at or before t
        overshoot = np.where(k > 0, np.maximum(self.ends[np.maximum(k - 1, 0)] - t, 0), 0) if len(self.starts) else 0
        return cumulative[k] - overshoot

    def busy_within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Busy time in [a, b) for each window."""
        return self.busy_before(b) - self.busy_before(a)


def count_within(sorted_times: np.ndarray, a: np.ndarray, b: np.ndarray, weights=None) -> np.ndarray:
    """How many (or, with weights, how much) of the sorted times fall in each [a, b)."""
    lo = np.searchsorted(sorted_times, a, side="left")
    hi = np.searchsorted(sorted_times, b, side="left")
    if weights is None:
        return hi - lo
    cumulative = np.concatenate([[0], np.cumsum(weights)])
    return cumulative[hi] - cumulative[lo]


def assign(times: np.ndarray, starts: np.ndarray, ends: np.ndarray, order=None) -> np.ndarray:
    """Index of the range (sorted, non-overlapping starts) holding each time, or -1. ``order``
    (an argsort of ``times``, or None) lets big arrays of times be assigned with two binary
    searches per range instead of one per time: the same indexes."""
    if len(starts) == 0:
        return np.full(len(times), -1)
    if len(times) > 4 * len(starts) and in_order(starts):
        if order is None and in_order(times):
            return _assign_in_order(times, starts, ends)
        if order is not None:
            idx = np.empty(len(times), np.int64)
            idx[order] = _assign_in_order(times[order], starts, ends)
            return idx
    idx = np.searchsorted(starts, times, side="right") - 1
    inside = (idx >= 0) & (times <= ends[np.maximum(idx, 0)])
    return np.where(inside, idx, -1)


def _assign_in_order(times: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """assign() for times in order: range i holds the times from its start up to its end or
    the next range's start (a time is the latest range's that starts at or before it), so its
    indexes are one run, and the runs and the gaps between them are laid down by np.repeat."""
    n, ranges = len(times), len(starts)
    lo = np.searchsorted(times, starts, side="left")
    hi = np.searchsorted(times, ends, side="right")
    hi[:-1] = np.minimum(hi[:-1], lo[1:])
    hi = np.maximum(hi, lo)
    lengths = np.empty(2 * ranges + 1, np.int64)
    lengths[0] = lo[0]
    lengths[2:-1:2] = lo[1:] - hi[:-1]
    lengths[-1] = n - hi[-1]
    lengths[1::2] = hi - lo
    values = np.full(2 * ranges + 1, -1, np.int64)
    values[1::2] = np.arange(ranges)
    return np.repeat(values, lengths)
