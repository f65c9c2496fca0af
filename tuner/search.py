"""Which candidates to try, in what order, and which one wins.

Plan: the model's predictions order the graph scopes and drop the hopeless ones (predicted
under ``SKIP_BELOW``) unless ``exhaustive``. Choice: the fastest candidate that ran and
matched eager; never one slower than eager (then eager wins).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

SKIP_BELOW = 1.02          # a scope predicted under this is not worth a capture
SCOPE_ORDER = ("full_iteration", "fwd_bwd", "submodule", "compile")
INFERENCE_ORDER = ("forward", "compile")


def scopes_for(kind: str) -> tuple:
    """The scopes of a loop of this kind (StepSpec.kind), in the order tried."""
    return INFERENCE_ORDER if kind == "inference" else SCOPE_ORDER


# the prediction that stands for a scope: an inference loop's forward graph is its whole iteration
PREDICTED_AS = {"forward": "full_iteration"}


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
    stochastic: bool = False         # dropout was active: parameters cannot match eager bit for bit
    note: str = ""                   # something the user should know about an ok run

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


def choose(eager_ms: float, candidates: list, gpu_busy_ms: Optional[float] = None) -> TuneResult:
    """The fastest usable candidate, if it beats eager; ranking: usable by speed, then the rest."""
    usable = sorted((c for c in candidates if c.usable), key=lambda c: c.ms_per_iter)
    winner = usable[0].scope if usable and usable[0].ms_per_iter < eager_ms else "eager"
    ranking = usable + [c for c in candidates if not c.usable]
    return TuneResult(eager_ms, gpu_busy_ms, candidates, winner, ranking)
