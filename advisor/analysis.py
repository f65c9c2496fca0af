"""The analysis facade: a Trace in, one GroupMetrics per process and GPU out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import TraceError
from .iterations import check_pattern
from .metrics import GroupMetrics, analyse_group
from .trace import OP_GRAPH, OP_KERNEL, Trace

SCHEMA = "cg-advise.analysis/2"


@dataclass
class Analysis:
    """What `cg-advise analyze` reports: the trace's identity, every group, and which one
    the summary is about (the process/GPU with the most GPU busy time)."""

    trace: dict
    groups: list
    reported: int
    predictions: dict = field(default_factory=dict)

    @property
    def main(self) -> GroupMetrics:
        return self.groups[self.reported]

    def to_dict(self) -> dict:
        main = self.main
        groups = [g.to_dict() for g in self.groups]
        summary = {"pid": main.pid, "process": main.process, "device": main.device, "gpu": main.gpu,
                   **groups[self.reported]["summary"]}
        return {
            "schema": SCHEMA,
            "trace": self.trace,
            "summary": summary,
            "reported_group": self.reported,
            "groups": groups,
            "predictions": self.predictions,
        }


def _distinct(values: np.ndarray) -> np.ndarray:
    """np.unique, without its sort where every value is the same (one process, one GPU)."""
    if len(values) and (values == values[0]).all():
        return values[:1].copy()
    return np.unique(values)


def analyse(trace: Trace, iteration_pattern: str | None = None) -> Analysis:
    if not trace.has_cuda:
        if trace.backend != "nsys":
            raise TraceError(f"{trace.path.name}: no CUDA activity in this torch.profiler trace (CPU operators "
                             "only); record it with ProfilerActivity.CUDA on a machine with an NVIDIA GPU")
        raise TraceError(f"{trace.path.name}: no CUDA activity in this export (NVTX or CPU data only); "
                         "profile with `-t cuda,nvtx` and an nsys that traces the CUDA runtime")
    if iteration_pattern is not None:
        check_pattern(trace, iteration_pattern)
    ops = trace.ops
    computes = (ops["kind"] == OP_KERNEL) | (ops["kind"] == OP_GRAPH) | ops["in_graph"]
    if not computes.any():
        # the one rule for "nothing to analyse": no kernel ran (copies and memsets alone are no loop)
        raise TraceError(f"{trace.path.name}: nothing to analyse: no kernel ran in this export "
                         f"({len(ops)} memory copies and sets)")
    pairs = [(pid, dev) for pid in _distinct(ops["pid"]) for dev in _distinct(ops["device"][ops["pid"] == pid])]
    groups = [analyse_group(trace, int(pid), int(dev), iteration_pattern) for pid, dev in pairs]
    busiest = max(range(len(groups)), key=lambda i: groups[i].summary.gpu_busy_ms_per_iteration
                  * max(groups[i].summary.iterations, 1))
    info = {
        "path": str(trace.path),
        "backend": trace.backend,
        "profiler": trace.profiler,
        "nsys_version": trace.nsys_version or None,
        "export_schema_version": trace.schema_version,
        "graph_trace_mode": trace.graph_mode,
        "processes": len({g.pid for g in groups}),
        "devices": len({g.device for g in groups}),
        "iteration_pattern": iteration_pattern,
        "pytorch": trace.pytorch,
    }
    return Analysis(trace=info, groups=groups, reported=busiest)
