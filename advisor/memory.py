"""Keeps the memory an analysis frees for its next arrays (glibc on Linux; elsewhere nothing).

An export of 10 million kernels makes columns of 80 MB. glibc gives every block above its
largest mmap threshold (32 MB) back to the kernel when it is freed, so each new temporary of
that size is fresh pages: faulted in and zeroed again, in the kernel's time. On a virtual
machine that hands free memory back to its host, a fresh page can cost 20 times what a reused
one does (measured: 2.5-2.9 ms against 0.13-0.15 ms per MB; bench/results/scale_bench.md).
Below 32 MB (a million kernels) glibc reuses its heap already, so the cost per kernel grew
with the export's size. Serving every block from the heap (no mmap) and leaving up to 2 GB
of it free at its top lets the arrays reuse the pages of the ones freed before them: the
kernel time of a second 10M analysis in one process went from 9 s to 0.6 s.

Process-wide and for good (glibc keeps no way back to its dynamic thresholds), so only
cg-advise's own commands call it, before they open a profile; importing the package changes
nothing.
"""

from __future__ import annotations

import platform
import sys

M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8   # glibc's malloc.h
KEPT_FREE_BYTES = 2**31 - 1   # the most mallopt takes (an int)

_kept = None


def keep_freed_memory() -> bool:
    """Makes glibc's malloc reuse freed blocks instead of unmapping them (once per process;
    True where it took). One arena: the reading threads' blocks are reused by the others."""
    global _kept
    if _kept is None:
        _kept = _mallopt(((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, KEPT_FREE_BYTES), (M_ARENA_MAX, 1)))
    return _kept


def _mallopt(settings) -> bool:
    """Never raises: a speed-up only (no ctypes in this Python, libc_ver unable to read the
    interpreter's file, musl, macOS, Windows: nothing is changed)."""
    try:
        if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
            return False
        import ctypes

        mallopt = ctypes.CDLL("libc.so.6").mallopt
        mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
        return all([mallopt(param, value) == 1 for param, value in settings])
    except Exception:  # noqa: BLE001
        return False
