"""Capture failures as results: the class of a failed candidate, where it happened, and the fix.

A candidate that runs but disagrees with eager is classified by the runner ("mismatch"),
not from a message.

Messages are matched on the text CUDA and PyTorch print (cudaErrorStreamCapture* strings,
PyTorch's own checks), never on exception types alone: a failure crosses a process boundary
as the child's stderr.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Optional

# (class, patterns, what it means, the fix) — first match wins, so specific before general.
RULES = (
    ("no-cuda",
     (r"Tried to instantiate dummy base class CUDAGraph", r"Torch not compiled with CUDA enabled",
      r"requires CUDA support", r"No CUDA GPUs are available"),
     "this torch or this machine has no CUDA device, so nothing can be captured",
     "run tune on the GPU machine, with a CUDA build of torch"),
    ("optimizer-not-capturable",
     (r"graph capture of step\(\) for an instance of \w+ but param_groups' capturable is False",),
     "the optimizer step was captured without capturable=True",
     "construct the optimizer with capturable=True (Adam, AdamW, ...), or keep optimizer.step() outside the graph"),
    ("sync-during-capture",
     (r"operation not permitted when stream is capturing", r"cudaErrorStreamCaptureUnsupported",
      r"Cannot copy between CPU and CUDA tensors during CUDA graph capture"),
     "a host synchronisation (.item(), .cpu(), .tolist(), print of a CUDA tensor, torch.cuda.synchronize(), "
     "a data-dependent shape such as nonzero or boolean indexing) ran inside the captured region",
     "move the sync out of the captured region (log losses after replay), or end the graph before it"),
    ("capture-invalidated",
     (r"operation failed due to a previous error during capture", r"cudaErrorStreamCaptureInvalidated"),
     "an earlier operation broke the capture; often another thread (pin_memory, a DataLoader worker, the "
     "NCCL watchdog) touched CUDA during a global capture, or the captured backward handed work to the default "
     "stream (a DistributedDataParallel built on it keeps its gradient accumulators there)",
     "capture with torch.cuda.graph(g, capture_error_mode='thread_local') and fix the first error reported; "
     "build DistributedDataParallel under a side stream (with torch.cuda.stream(s): model = DDP(...))"),
    ("unjoined-side-stream",
     (r"capturing stream has unjoined work", r"cudaErrorStreamCaptureUnjoined"),
     "work forked to a side stream during capture was not joined back",
     "end every side stream with capture_stream.wait_stream(side_stream) before the capture ends"),
    ("legacy-stream-dependency",
     (r"operation would make the legacy stream depend on a capturing blocking stream",
      r"cudaErrorStreamCaptureImplicit"),
     "work on the default (legacy) stream depends on the capture, typically AccumulateGrad of parameters "
     "first touched on the default stream",
     "run the warm-up iterations on a side stream before capturing (and construct DDP there)"),
    ("cross-stream-isolation",
     (r"dependency created on uncaptured work in another stream", r"cudaErrorStreamCaptureIsolation",
      r"operation would result in a merge of separate capture sequences", r"cudaErrorStreamCaptureMerge"),
     "the captured stream waited on an event from uncaptured work",
     "record the events the graph waits on inside the capture, or synchronise before capturing"),
    ("rng-not-graph-safe",
     (r"current_seed during CUDA graph capture", r"CUDA generator expects graph capture to be underway",
      r"Offset increment outside graph capture", r"increase offset for a CUDA generator not in capture mode"),
     "a random generator not registered with the graph was used during capture",
     "use the default CUDA generator (registered by torch.cuda.graph), or register yours with graph.register_generator_state"),
    ("illegal-address",
     (r"an illegal memory access was encountered", r"cudaErrorIllegalAddress"),
     "a replay read memory that was freed or reallocated: an input tensor was replaced instead of refilled",
     "keep static input tensors alive and fill them with static_input.copy_(batch) before each replay"),
    ("out-of-memory",
     (r"CUDA out of memory", r"OutOfMemoryError", r"cudaErrorMemoryAllocation"),
     "the graph's private memory pool did not fit next to the eager allocations",
     "share one pool between graphs (pool=graph.pool()), capture fewer scopes, or lower the batch size"),
    # several ranks (torchrun): after the rules above, so that the first error of one rank (a sync
    # during capture, an OOM) is named, not what the other ranks see once it is gone
    ("nccl-not-capturable",
     # ProcessGroupNCCL.cpp, errorIfCapturingNonCapturableNCCL:
     #   "Capturing NCCL collectives is only allowed with NCCL >= 2.9.6"
     (r"Capturing NCCL collectives is only allowed with NCCL >= 2\.9\.6",),
     "this NCCL cannot record collectives in a CUDA graph",
     "keep the all-reduce outside the graph (full_iteration_allreduce_outside, fwd_bwd), or use NCCL >= 2.9.6"),
    ("ddp-reduction-unfinished",
     # reducer.cpp, ensure_prior_reduction_finished: "Expected to have finished reduction in the prior
     #   iteration before starting a new one. ..."
     (r"Expected to have finished reduction in the prior iteration before starting a new one",),
     "DDP's reducer did not get every gradient of the previous iteration: a graph replayed a backward "
     "without DDP's hooks armed (the DDP wrapper itself graphed), or a parameter took no part in the loss",
     "graph the wrapped module (model.module), which DDP then all-reduces eagerly, or capture the whole "
     "iteration with DDP built on a side stream"),
    ("collective-mismatch",
     # ProcessGroupNCCL.cpp, the watchdog: "[Rank ", rank_, "] ", "Watchdog caught collective operation
     #   timeout: ", work, " ran for ", timeElapsed.count(), " milliseconds before timing out."
     # gloo, transport/tcp/unbound_buffer.cc: "Timed out waiting ", timeout, "ms for recv operation to complete"
     #   (tests/capture_errors/gloo_collective_on_one_rank.txt, on the CPU)
     (r"Watchdog caught collective operation timeout", r"Timed out waiting \d+ms for (recv|send) operation"),
     "a rank waited in a collective that another rank never joined: the ranks did not run the same "
     "collectives in the same order (a collective on one rank only, or one rank replaying a graph that "
     "holds the all-reduce while another ran its step eagerly)",
     "make every rank take the same path at each iteration (batches of one shape on every rank: "
     "DistributedSampler(drop_last=True) and a DataLoader with drop_last=True; the same capture on every rank)"),
)

FRAME = re.compile(r'File "([^"]+)", line (\d+)')
LIBRARY = re.compile(r"(site-packages|dist-packages|/torch/|<frozen |/runpy\.py|advisor/inject\.py|tuner/)")


@dataclass
class Failure:
    kind: str
    meaning: str
    fix: str
    where: Optional[str]    # "train.py:42", the user's innermost frame, when the traceback shows it
    message: str            # the first line of the error itself

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return f"{self.kind}{at}: {self.meaning}; fix: {self.fix}"


def user_frame(text: str) -> Optional[str]:
    """The innermost traceback frame outside PyTorch, the standard library and cg-advise."""
    frames = [(path, line) for path, line in FRAME.findall(text) if not LIBRARY.search(path)]
    if not frames:
        return None
    path, line = frames[-1]
    return f"{path}:{line}"


RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s?")   # torchrun's workers prefix their tracebacks so
LAUNCHER_ERROR = "ChildFailedError"             # torchrun's own summary: that a worker failed, not why


def error_line(text: str) -> str:
    """The exception line of a traceback (or the text's last non-empty line); under torchrun,
    the workers' own error rather than the launcher's summary of it."""
    lines = [RANK_PREFIX.sub("", line.strip()).strip() for line in text.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[\w.]+(Error|Exception)\b", line)
              or line.startswith(("RuntimeError", "torch."))]
    own = [line for line in errors if LAUNCHER_ERROR not in line]
    if own or errors:
        return (own or errors)[-1]
    return lines[-1] if lines else ""


def classify(text: str) -> Failure:
    for kind, patterns, meaning, fix in RULES:
        found = [m for m in (re.search(p, text) for p in patterns) if m]
        if found:
            # the cause's own frame: a chained traceback ("During handling of the above exception")
            # ends at the statement that noticed the failure, not the one that caused it
            end = text.find("\n", min(m.start() for m in found))
            cause = text[:end] if end >= 0 else text
            return Failure(kind, meaning, fix, user_frame(cause) or user_frame(text), error_line(cause))
    return Failure("other", "the candidate failed for a reason cg-advise does not recognise",
                   "read the message; run the scope by hand to see the full traceback", user_frame(text),
                   error_line(text))
