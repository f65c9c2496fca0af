"""Failure classification on the messages CUDA and PyTorch print."""

import pytest

from conftest import ROOT
from tuner.errors import classify, error_line, user_frame

MESSAGES = ROOT / "tests" / "capture_errors"


@pytest.mark.parametrize("name,kind,where", [
    ("item_in_capture", "sync-during-capture", "/home/user/train.py:42"),
    ("adam_not_capturable", "optimizer-not-capturable", "/home/user/train.py:57"),
    ("unjoined", "unjoined-side-stream", "model.py:88"),
    ("legacy_stream", "legacy-stream-dependency", None),
    ("invalidated", "capture-invalidated", "/work/train.py:12"),
    ("oom", "out-of-memory", None),
    ("illegal_address", "illegal-address", None),
])
def test_classification(name, kind, where):
    failure = classify((MESSAGES / f"{name}.txt").read_text())
    assert (failure.kind, failure.where) == (kind, where)
    assert failure.fix and failure.meaning


def test_error_line_is_the_exception_not_the_cuda_hints():
    text = (MESSAGES / "item_in_capture.txt").read_text()
    assert error_line(text) == "RuntimeError: CUDA error: operation not permitted when stream is capturing"


def test_library_frames_are_skipped():
    text = (MESSAGES / "adam_not_capturable.txt").read_text()
    assert user_frame(text) == "/home/user/train.py:57"


def test_unknown_failure_is_other():
    failure = classify("ValueError: something else entirely")
    assert failure.kind == "other" and failure.message == "ValueError: something else entirely"
    assert failure.describe().startswith("other: ")
