"""Which candidates to try, in what order, and which one wins.

Plan: the model's predictions order the graph scopes and drop the hopeless ones (predicted
under ``SKIP_BELOW``) unless ``exhaustive``. Choice: the fastest candidate that ran and
matched eager; never one slower than eager (then eager wins).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Optional

SKIP_BELOW = 1.02          # a scope predicted under this is not worth a capture
MIN_GAIN = 0.03            # a win must beat eager by more than this and than the measured spread: the
                           # same file in fresh processes drifts by up to 4 % on the H200 even when its
                           # iteration is a pure graph replay (bench/results/repeatability.json)
SCOPE_ORDER = ("full_iteration", "fwd_bwd", "submodule", "compile")
INFERENCE_ORDER = ("forward", "compile")
# a DDP loop's whole iteration once more with the all-reduce outside the graph: the forward and
# backward captured under no_sync(), the gradients all-reduced and the optimizer stepped eagerly
ALLREDUCE_OUTSIDE = "full_iteration_allreduce_outside"
DDP_ORDER = ("full_iteration", ALLREDUCE_OUTSIDE, "fwd_bwd", "submodule", "compile")


def scopes_for(kind: str, ddp: bool = False) -> tuple:
    """The scopes of a loop of this kind (StepSpec.kind), in the order tried; a loop whose model
    is wrapped in DistributedDataParallel has one more."""
    return INFERENCE_ORDER if kind == "inference" else DDP_ORDER if ddp else SCOPE_ORDER


# the prediction that stands for a scope: an inference loop's forward graph is its whole iteration
PREDICTED_AS = {"forward": "full_iteration", ALLREDUCE_OUTSIDE: "full_iteration"}


# A model graphed with make_graphed_callables runs its own eager forward and backward slower
# than a model never graphed: each parameter's AccumulateGrad node was made on the side stream of
# the graphing's warm-up, and an eager backward on the default stream now waits on that stream
# (PyTorch warns of the mismatch). The eager windows of a paired timing pay it, a user's eager
# run does not: 1.06, 1.07, 1.09 on the lent H200 and 1.09, 1.06 on the H100, an MLP's eager
# steps beside a never-graphed copy's in the same process, windows round-robin
# (bench/paired_windows_probe.py contamination); 1.02-1.06 on five tiny models of 2-48 parameter
# tensors with their optimizer, 0.9-6 ms a step, on the lent H200 (bench/eager_slowdown_probe.py).
# Their median is taken out of paired speedups. (A patch's own forward around the graphed module
# is no part of it: the eager windows bypass it, tuner/harness.py _switch_patch_holder.)
# A full-iteration graph's eager steps (tuner/harness.py eager_call, the optimizer stepping as
# built, not capturable) pay it too: 1.05-1.10 (SGD) and 1.03-1.10 (AdamW) over eight MLPs of
# 2-24 layers on the lent H100, median 1.07 (bench/paired_windows_probe.py contamination-full;
# kept capturable, AdamW's eager steps read 1.17-1.32). A compiled model's own eager steps do not
# pay it (torch.compile's CUDA graphs warm up and capture inside dynamo's frame, not on the
# parameters' autograd nodes): 0.98-1.00 of a never-compiled copy's over four MLPs on the lent
# H100 (bench/paired_windows_probe.py contamination-compile).
GRAPHED_EAGER_SLOWDOWN = {"fwd_bwd": 1.07, "submodule": 1.07, "full_iteration": 1.07, "compile": 1.0}


def eager_slowdown(scope: str) -> float:
    """How much slower a scope's own eager windows run than the user's eager loop (1 if unknown)."""
    return GRAPHED_EAGER_SLOWDOWN.get(scope, 1.0)


@dataclass
class Candidate:
    scope: str
    status: str = "pending"          # ok, failed, mismatch, skipped
    ms_per_iter: Optional[float] = None
    peak_mb: Optional[float] = None
    correct: Optional[bool] = None
    failure: Optional[dict] = None   # tuner.errors.Failure as a dict
    predicted: Optional[float] = None
    run_ms: Optional[list] = None    # ms/iteration of each process, when run more than once
    stochastic: bool = False         # the step draws random numbers: parameters cannot match eager bit for bit
    note: str = ""                   # something the user should know about an ok run
    window_ms: Optional[list] = None  # ms/iteration of each timed window of one process
    rank_ms: Optional[list] = None   # under torchrun: each rank's ms/iteration (ms_per_iter is the slowest)
    rank_differences: Optional[list] = None   # under torchrun: each rank's parameter difference from eager's
    # timed paired (PAIRED_SCOPES): eager over graphed in windows alternating in the same
    # process, its eager windows, and the graphed ms/iteration as measured in that process
    # (ms_per_iter is then eager's ms over the paired speedup: this scope at the eager run's host speed)
    paired_speedup: Optional[float] = None
    paired_ratios: Optional[list] = None   # each eager window over a graphed neighbour (one process)
    paired_runs: Optional[list] = None     # the paired speedup of each process, when run more than once
    paired_eager_ms: Optional[float] = None
    measured_ms: Optional[float] = None
    window_steps: Optional[int] = None     # timed paired: steps in each measured graphed window (one process)
    steps: Optional[int] = None            # the steps its process ran; run to the script's end, the script's length

    @property
    def spread(self) -> float:
        """How far this measurement moved: slowest/fastest - 1 over processes when it ran in
        several; else upper/lower quartile - 1 over the timed windows of its one process (timed
        paired: over the processes' paired speedups, else its window pairs' ratios). A
        window that holds the loop's own periodic work (an evaluation every N steps, a
        checkpoint) is no noise, and the median window, the measurement, leaves it out: taken
        as the spread, one such window made a 27x win 'within the noise (3966 %)'."""
        if self.paired_speedup:   # timed paired: the noise is its ratios', not the processes' host speed
            runs, ratios = self.paired_runs or [], self.paired_ratios or []
        else:
            runs, ratios = self.run_ms or [], self.window_ms or []
        if len(runs) > 1:
            return _relative_spread(runs, quartiles=False)
        return _relative_spread(ratios, quartiles=True)

    @property
    def paired_gain(self) -> Optional[float]:
        """The paired speedup with the slowdown that graphing lays on the eager windows taken out."""
        return self.paired_speedup / eager_slowdown(self.scope) if self.paired_speedup else None

    def bind_to_eager(self, eager_ms: float, gpu_busy_ms: Optional[float] = None) -> None:
        """Timed paired: its ms/iteration becomes eager's over the paired gain, this scope at the
        host speed of the eager run it is ranked against (what its own process timed is kept as
        ``measured_ms``), but never under the GPU-busy time of the iteration where a profile
        gave it: a graph removes launch gaps, not GPU work, so an eager run on a slower host
        than the graph's process does not make the graph faster than its GPU."""
        if self.paired_speedup and self.ms_per_iter is not None and self.measured_ms is None:
            self.measured_ms, self.ms_per_iter = self.ms_per_iter, max(eager_ms / self.paired_gain, gpu_busy_ms or 0.0)

    @property
    def usable(self) -> bool:
        return self.status == "ok" and self.correct is not False and self.ms_per_iter is not None


@dataclass
class TuneResult:
    eager_ms: float
    gpu_busy_ms: Optional[float]
    candidates: list
    winner: str
    ranking: list = field(default_factory=list)
    note: str = ""                   # why a faster candidate did not win (within the noise)

    def speedup(self, candidate: Candidate) -> Optional[float]:
        return self.eager_ms / candidate.ms_per_iter if candidate.usable else None

    def recovered(self, candidate: Candidate) -> Optional[float]:
        """Share of the launch overhead recovered: (eager - chosen) / (eager - GPU busy)."""
        if not candidate.usable or not self.gpu_busy_ms or self.eager_ms <= self.gpu_busy_ms:
            return None
        return (self.eager_ms - candidate.ms_per_iter) / (self.eager_ms - self.gpu_busy_ms)

    def to_dict(self) -> dict:
        return {**asdict(self), "rows": [
            {**asdict(c), "speedup": self.speedup(c), "recovered": self.recovered(c)} for c in self.ranking]}


def plan(predictions: Optional[dict], exhaustive: bool = False, scopes: tuple = SCOPE_ORDER) -> list:
    """Candidates to try, most promising first; hopeless ones come back as skipped."""
    candidates = []
    for scope in scopes:
        predicted = None
        if predictions:   # an inference trace predicts `forward` itself; a training trace's full_iteration stands in
            entry = predictions.get(scope) or predictions.get(PREDICTED_AS.get(scope, scope)) or {}
            predicted = entry.get("speedup")
        candidate = Candidate(scope, predicted=predicted)
        if predicted is not None and predicted < SKIP_BELOW and not exhaustive:
            candidate.status = "skipped"
        candidates.append(candidate)
    return sorted(candidates, key=lambda c: (c.status == "skipped", -(c.predicted or 0.0)))


def _relative_spread(values, quartiles: bool) -> float:
    """upper/lower quartile - 1 (``quartiles``), else largest/smallest - 1; 0 for fewer than two."""
    values = [v for v in values if v]
    if len(values) < 2:
        return 0.0
    if not quartiles:
        return max(values) / min(values) - 1
    lower, _, upper = statistics.quantiles(values, n=4, method="inclusive")
    return upper / lower - 1


def choose(eager_ms: float, candidates: list, gpu_busy_ms: Optional[float] = None,
           eager_spread: float = 0.0) -> TuneResult:
    """The fastest usable candidate, if it beats eager by more than the noise (``MIN_GAIN`` and
    the measured spread of either timing); ranking: usable by speed, then the rest."""
    usable = sorted((c for c in candidates if c.usable), key=lambda c: c.ms_per_iter)
    winner, note = "eager", ""
    if usable and usable[0].ms_per_iter < eager_ms:
        best = usable[0]
        # a paired candidate's ratio never saw the eager run's host speed: its own spread is the noise
        margin = max(MIN_GAIN, best.spread) if best.paired_speedup else max(MIN_GAIN, eager_spread, best.spread)
        if best.ms_per_iter * (1 + margin) < eager_ms:
            winner = best.scope
        else:
            note = (f"no significant gain: {best.scope} at {eager_ms / best.ms_per_iter:.2f}x is within the noise "
                    f"of the measurement ({margin:.0%}); eager is kept")
    ranking = usable + [c for c in candidates if not c.usable]
    return TuneResult(eager_ms, gpu_busy_ms, candidates, winner, ranking, note)
