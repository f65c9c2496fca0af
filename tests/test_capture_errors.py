"""Failure classification on the messages CUDA and PyTorch print."""

import pytest

from conftest import ROOT
from tuner.errors import classify, error_line, user_frame

MESSAGES = ROOT / "tests" / "capture_errors"


@pytest.mark.parametrize("name,kind,line", [
    ("item_in_capture", "sync-during-capture", 15),          # the .item(), not the `with` that noticed
    ("boolean_index_in_capture", "sync-during-capture", 15),
    ("cpu_copy_in_capture", "sync-during-capture", 15),
    ("adam_not_capturable", "optimizer-not-capturable", 16),
    ("unjoined", "unjoined-side-stream", 14),
    ("invalidated", "capture-invalidated", 19),
    ("oom", "out-of-memory", 15),
    ("illegal_address", "illegal-address", 20),
    ("rng_generator", "rng-not-graph-safe", 16),
])
def test_classification_of_failures_captured_on_the_gpu(name, kind, line):
    failure = classify((MESSAGES / f"{name}.txt").read_text())
    assert (failure.kind, failure.where) == (kind, f"/tmp/fail/{name}.py:{line}")
    assert failure.fix and failure.meaning


def test_the_cause_of_a_chained_traceback_is_reported():
    text = (MESSAGES / "item_in_capture.txt").read_text()
    assert "During handling of the above exception" in text
    assert classify(text).message == "torch.AcceleratorError: CUDA error: operation not permitted when stream is capturing"
    assert error_line(text) == ("torch.AcceleratorError: CUDA error: operation failed due to a previous error "
                                "during capture")


def test_library_frames_are_skipped():
    text = (MESSAGES / "adam_not_capturable.txt").read_text()
    assert "site-packages/torch/" in text
    assert user_frame(text) == "/tmp/fail/adam_not_capturable.py:16"


def test_unknown_failure_is_other():
    failure = classify("ValueError: something else entirely")
    assert failure.kind == "other" and failure.message == "ValueError: something else entirely"
    assert failure.describe().startswith("other: ")


def test_a_cpu_build_is_named_as_such():
    failure = classify("  File \"/w/train.py\", line 3, in <module>\n"
                       "RuntimeError: Tried to instantiate dummy base class CUDAGraph\n")
    assert (failure.kind, failure.where) == ("no-cuda", "/w/train.py:3")


def test_a_collective_on_one_rank_only_captured_under_torchrun():
    """gloo on the CPU (tests/capture_errors/README.md): rank 1 all-reduces once more than rank 0;
    both time out after 5 s. The workers' own error is the message, not torchrun's summary."""
    text = (MESSAGES / "gloo_collective_on_one_rank.txt").read_text()
    assert "ChildFailedError" in text
    failure = classify(text)
    assert failure.kind == "collective-mismatch"
    assert failure.where.startswith("/tmp/fail/collective_on_one_rank.py:")
    assert failure.message.startswith("RuntimeError: [") and failure.message.endswith(
        "Timed out waiting 5000ms for recv operation to complete")


@pytest.mark.parametrize("text,kind", [
    # the strings PyTorch's C++ prints (quoted in tuner/errors.py); to be confirmed on the GPUs
    ("RuntimeError: Capturing NCCL collectives is only allowed with NCCL >= 2.9.6", "nccl-not-capturable"),
    ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This "
     "error indicates that your module has parameters that were not used in producing loss.", "ddp-reduction-unfinished"),
    ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, "
     "NumelOut=1, Timeout(ms)=20000) ran for 20001 milliseconds before timing out.", "collective-mismatch"),
])
def test_multi_rank_failure_classes(text, kind):
    assert classify(text).kind == kind


@pytest.mark.parametrize("name,kind,where", [
    ("nccl_collective_on_one_rank", "collective-mismatch", "/root/out/ddp/work/collective_on_one_rank.py:14"),
    ("nccl_capture_replayed_unevenly", "collective-mismatch", None),   # the watchdog's line names no user frame
    ("nccl_full_capture_default_stream_ddp", "sync-during-capture",
     "/root/out/ddp/work/full_capture_default_stream_ddp.py:20"),
])
def test_multi_rank_failures_captured_on_two_gpus(name, kind, where):
    """NCCL on two H200 (tests/capture_errors/README.md): the classes the multi-rank rules give."""
    failure = classify((MESSAGES / f"{name}.txt").read_text())
    assert (failure.kind, failure.where) == (kind, where)
    if kind == "collective-mismatch":
        assert "Watchdog caught collective operation timeout" in failure.message
