"""cg-advise's commands keep freed memory for reuse (glibc); importing the package does not."""

import platform
import subprocess
import sys

import pytest

from conftest import TRACES

ROOT = TRACES.parent


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          check=True).stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="glibc's mallopt")
def test_keep_freed_memory_takes_once_and_the_analysis_is_unchanged():
    out = run("import json; from advisor import memory; from advisor.analysis import analyse; "
              "from advisor.trace import open_trace; "
              "t = 'sample_traces/launch_eager.sqlite'; before = json.dumps(analyse(open_trace(t)).to_dict(), default=str); "
              "took = memory.keep_freed_memory(); again = memory.keep_freed_memory(); "
              "after = json.dumps(analyse(open_trace(t)).to_dict(), default=str); print(took, again, before == after)")
    assert out == "True True True"


def test_elsewhere_it_does_nothing(monkeypatch):
    from advisor import memory

    monkeypatch.setattr(memory.sys, "platform", "darwin")
    assert memory._mallopt(((memory.M_MMAP_MAX, 0),)) is False


def test_it_never_raises(monkeypatch):
    """musl (no glibc), a libc_ver that cannot read the interpreter, a libc without mallopt."""
    from advisor import memory

    monkeypatch.setattr(memory.sys, "platform", "linux")
    monkeypatch.setattr(memory.platform, "libc_ver", lambda: ("", ""))
    assert memory._mallopt(((memory.M_MMAP_MAX, 0),)) is False

    def unreadable():
        raise PermissionError("no access to the interpreter's file")

    monkeypatch.setattr(memory.platform, "libc_ver", unreadable)
    assert memory._mallopt(((memory.M_MMAP_MAX, 0),)) is False
    import ctypes

    monkeypatch.setattr(memory.platform, "libc_ver", lambda: ("glibc", "2.17"))
    monkeypatch.setattr(ctypes, "CDLL", lambda name: (_ for _ in ()).throw(OSError(f"{name}: not found")))
    assert memory._mallopt(((memory.M_MMAP_MAX, 0),)) is False
