"""The vectorised interval helpers against plain Python loops over the same numbers."""

import numpy as np
import pytest

from advisor.intervals import assign
from advisor.metrics import _first_start_last_end, busy_per_owner


def assign_by_loop(times, starts, ends):
    """The range holding each time: the last one starting at or before it, if it has not ended."""
    out = []
    for t in times:
        started = [i for i, s in enumerate(starts) if s <= t]
        out.append(started[-1] if started and t <= ends[started[-1]] else -1)
    return out


def ranges(rng, count):
    """Sorted starts (ties included) and ends, some before their start, some overlapping."""
    starts = np.sort(rng.integers(0, 100, count))
    return starts, starts + rng.integers(-5, 30, count)


@pytest.mark.parametrize("seed", range(40))
def test_assign_matches_a_loop_for_times_in_order_and_out_of_order(seed):
    rng = np.random.default_rng(seed)
    starts, ends = ranges(rng, int(rng.integers(1, 12)))
    times = rng.integers(-10, 130, int(rng.integers(60, 200)))   # many more times than ranges: the fast paths
    expected = assign_by_loop(times, starts, ends)
    order = np.argsort(times, kind="stable")
    assert assign(times, starts, ends, order).tolist() == expected
    assert assign(times, starts, ends).tolist() == expected
    in_order = np.sort(times)
    assert assign(in_order, starts, ends).tolist() == assign_by_loop(in_order, starts, ends)


def test_assign_of_no_ranges_and_of_no_times():
    assert assign(np.array([1, 2, 3]), np.empty(0, np.int64), np.empty(0, np.int64)).tolist() == [-1, -1, -1]
    assert assign(np.empty(0, np.int64), np.array([1]), np.array([5])).tolist() == []


@pytest.mark.parametrize("seed", range(20))
def test_busy_time_and_extent_per_owner_match_a_loop(seed):
    rng = np.random.default_rng(seed)
    n, owners = int(rng.integers(1, 80)), int(rng.integers(1, 6))
    starts = np.sort(rng.integers(0, 1000, n))
    ends = starts + rng.integers(0, 60, n)
    owner = rng.integers(0, owners, n) if seed % 2 else np.sort(rng.integers(0, owners, n))  # in time order, or not
    busy = busy_per_owner(starts, ends, owner, owners)
    first, last = _first_start_last_end(starts, ends, owner, owners)
    for k in range(owners):
        covered = set()
        for s, e, o in zip(starts, ends, owner):
            if o == k:
                covered.update(range(int(s), int(e)))
        mine = owner == k
        assert busy[k] == len(covered)
        assert first[k] == (starts[mine].min() if mine.any() else np.iinfo(np.int64).max)
        assert last[k] == (ends[mine].max() if mine.any() else 0)


@pytest.mark.parametrize("seed", range(20))
def test_first_occurrence_of_each_owner_matches_a_loop(seed):
    from advisor.metrics import _first_of_each

    rng = np.random.default_rng(seed)
    owner = rng.integers(-1, 6, int(rng.integers(0, 60)))
    if seed % 2:   # owners that follow one another, with unowned operations between
        owner = np.where(owner >= 0, np.sort(owner), -1)
    first = {}
    for i, o in enumerate(owner.tolist()):
        if o >= 0:
            first.setdefault(o, i)
    used, at = _first_of_each(owner)
    assert used.tolist() == sorted(first) and at.tolist() == [first[o] for o in sorted(first)]
