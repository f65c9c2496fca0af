"""The run record: what `cg-advise profile` measured outside the trace, kept beside the report.

A trace shows the run as traced; the prediction needs three things it cannot show: the
eager iteration time without the tracer's cost (timed by the bootstrap in the untraced
warm-up), how this GPU launches and replays work (advisor.calibrate), and the capture
scopes as `patch` would apply them to the script (the optimizer kept eager under a
GradScaler, a scope refused). ``analyze`` reads it when it lies beside the export; an export
without one is analysed as before, with the eager time estimated and said to be.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Optional

from .errors import CgAdviseError
from .sourcefile import atomic_write

SCHEMA = "cg-advise.run/1"


MEASURED_DTYPES = ("torch.float32",)   # the calibration steps float32 tensors: other dtypes change the per-element cost


def capturable_specs(injected: dict) -> list:
    """``CLASS:TENSORS:ELEMENTS:GROUPS`` of each optimizer the bootstrap saw a full-iteration
    graph make capturable, for the calibration to step (advisor.calibrate ``--capturable``).
    None at all where the calibration would not step the same update: a subclass of torch's
    optimizer (its own step), tensors of another dtype, foreach turned off, or optimizers that
    do not hold every tensor made capturable (one built anew each epoch, or more than the
    bootstrap describes); the prediction then keeps the fitted cost. A record from before these
    facts were kept is taken as torch's class, float32 and foreach."""
    specs, tensors = [], 0
    for o in (injected or {}).get("optimizers") or []:
        if not (isinstance(o, dict) and isinstance(o.get("made_capturable"), int) and o["made_capturable"] > 0):
            continue
        elements, groups = o.get("made_capturable_elements"), o.get("made_capturable_groups", 1)
        if not (str(o.get("class", "")).isidentifier() and isinstance(elements, int) and elements >= o["made_capturable"]
                and isinstance(groups, int) and 1 <= groups <= o["made_capturable"]
                and o.get("torch_class", True) is True and not o.get("made_capturable_foreach_off")
                and set(o.get("made_capturable_dtypes") or MEASURED_DTYPES) <= set(MEASURED_DTYPES)):
            return []
        specs.append(f"{o['class']}:{o['made_capturable']}:{elements}:{groups}")
        tensors += o["made_capturable"]
    made = ((injected or {}).get("made_capturable") or {}).get("tensors")
    return specs if made is None or made == tensors else []


def calibration(python: str, capturable: tuple = ()) -> dict:
    """The micro-benchmark in the user's interpreter; {"error": why} when it cannot run.
    ``capturable``: optimizers as ``capturable_specs`` gives them, whose capturable step it
    also measures."""
    from .profile import importable_env

    extra = [arg for spec in capturable for arg in ("--capturable", spec)]
    try:
        out = subprocess.run([python, "-m", "advisor.calibrate", *extra], capture_output=True, text=True, timeout=300,
                             env=importable_env())
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"error": f"calibration did not run: {error}"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    try:
        return json.loads(lines[-1]) if lines else {"error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    except ValueError:
        return {"error": "calibration printed no JSON"}


def applied_scopes(script, step: Optional[str] = None) -> dict:
    """Each scope of the script's loop as `patch` would apply it: refused (and why), or
    applied, with the optimizer step kept eager or not. Static: nothing runs."""
    from tuner.discover import UncapturableLoop, discover
    from tuner.harness import step_counting
    from tuner.patch import make_patch
    from tuner.search import scopes_for

    # after a long profile nothing here may fail the command: any error is recorded instead
    try:
        spec = discover(Path(script), step=step)
    except UncapturableLoop as error:   # no scope applies: the predictions say so, not a number
        return {"error": str(error), "uncapturable": True}
    except Exception as error:  # noqa: BLE001 - discovery's refusal or a script libcst cannot read
        return {"error": str(error) or type(error).__name__}
    scopes = {}
    for scope in scopes_for(spec.kind):
        try:
            patch = make_patch(script, scope, spec=spec)
        except Exception as error:  # noqa: BLE001 - patch's refusal, or a rewrite it cannot make
            scopes[scope] = {"applies": False, "why": str(error) or type(error).__name__}
            continue
        scopes[scope] = {"applies": True, "optimizer_eager": patch.optimizer_eager,
                         "zero_grad_in_graph": patch.zero_grad_in_graph, "per_micro_step": patch.per_micro_step,
                         "prepared_share": patch.prepared_share,
                         "models": patch.models, **({"eager": patch.compile_eager} if patch.compile_eager else {}),
                         **({"helper_inputs": patch.helper_inputs} if patch.helper_inputs is not None else {})}
    counting = step_counting(spec.to_dict())
    return {"kind": spec.kind, "step": spec.describe(), "counts": counting["count"],
            "backward_calls": counting["backward_calls"], "scopes": scopes}


BARE_WARMUP, BARE_ITERATIONS = 10, 100   # as tune times eager: steps before timing, timed steps (5 windows)
# profile's default: the profiled process's baseline is timed under nsys, whose cost a fitted
# factor takes out; on one H200 start, that read tune's eager time within 10 % for 2 of 12 loops
# and within 20 % for 8 (up to 45 % off), three bare processes' median within 10 % for 8 and
# within 14 % for all 12 (bench/results/paired_timing/h200_bare_baseline_2026-11-29/). Each
# process costs the script's start-up and 110 steps (3 s at least): 30-60 s in all for those
# loops of a few milliseconds a step; the default is skipped where the steps alone would take
# longer than DEFAULT_BARE_BUDGET_S.
DEFAULT_BASELINE_RUNS = 3
DEFAULT_BARE_BUDGET_S = 120.0


def default_baseline_runs(calibrated: dict, target, applied: Optional[dict], step_ms: float) -> tuple:
    """(how many bare processes profile times the eager loop in when not told, why none where
    that is worth saying). None, silently, where bare_baseline could not take them (no GPU
    calibrated: no graph for tune to time; -m module, a launcher, no loop found); none, said,
    where the bootstrap's ``step_ms`` (ms/iteration) puts their steps over DEFAULT_BARE_BUDGET_S."""
    if "error" in calibrated or bare_refusal(target, applied):
        return 0, None
    seconds = DEFAULT_BASELINE_RUNS * (BARE_WARMUP + BARE_ITERATIONS) * step_ms / 1e3
    if seconds > DEFAULT_BARE_BUDGET_S:
        return 0, (f"eager loop in fresh processes: not timed by default, {DEFAULT_BASELINE_RUNS} of them would run "
                   f"{seconds:.0f} s of steps ({step_ms:.0f} ms each); --baseline-runs {DEFAULT_BASELINE_RUNS} takes them")
    return DEFAULT_BASELINE_RUNS, None


def bare_refusal(target, applied: Optional[dict]) -> Optional[str]:
    """Why bare_baseline cannot time this target's loop (None: it can)."""
    if getattr(target, "launcher", None):
        return "not taken under a distributed launcher"
    if target.argv and target.argv[0] == "-m":
        return "not taken for -m module (the harness runs a script file)"
    if not applied or "kind" not in applied:
        why = (applied or {}).get("error") or "the script's step was not found"
        return f"no training or inference loop to time: {why}"
    return None


def bare_baseline(target, applied: Optional[dict], runs: int, timeout_s: float = 600.0) -> dict:
    """The eager loop timed as tune times it: ``runs`` fresh processes of the script under
    tune's harness, no profiler attached, each stopped after its timed steps; the median of
    their ms/iteration. One process's eager timing of a host-bound loop lands anywhere in a
    1.2-1.4x spread (the host's own speed drifts: bench/results/host_speed_h100/; tune's own
    processes: bench/results/unseen_corpus_h100/runs3/), and the bootstrap's baseline is one
    process under nsys: with ``profile --baseline-runs N`` the prediction divides the median
    of N instead. Each process may take up to ``timeout_s``. {"error": why} when it cannot be
    taken (Ctrl-C included: the profile before it is still recorded and analysed)."""
    import shutil

    refused = bare_refusal(target, applied)
    if refused:
        return {"error": refused}
    workdir = None
    try:
        from tuner.harness import Settings
        from tuner.runner import new_workdir, run_repeated
        from tuner.tune import time_eager

        # a loop without an optimizer is counted by its backward() calls, so many a step as tune counts
        settings = Settings(kind=applied["kind"], count=applied.get("counts", "optimizer"), warmup=BARE_WARMUP,
                            iterations=BARE_ITERATIONS, to_end=False, backward_calls=applied.get("backward_calls", 1))
        workdir = new_workdir()
        script, args = Path(target.script), list(target.argv[1:])
        measured, _, settings = time_eager(   # a script of fewer steps: timed over what it has, as tune does
            lambda timing: run_repeated(script, args, "eager", timing, workdir, timeout_s, runs, python=target.python),
            settings)
    except KeyboardInterrupt:
        return {"error": "interrupted"}
    except Exception as error:  # noqa: BLE001 - after a long profile nothing here may fail the command
        return {"error": str(error) or type(error).__name__}
    finally:
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    if measured.status != "ok" or not measured.ms_per_iter:
        failure = measured.failure or {}
        return {"error": failure.get("message") or failure.get("kind") or measured.status}
    return {"runs": len(measured.run_ms or [measured.ms_per_iter]), "run_ms": measured.run_ms or [measured.ms_per_iter],
            "ms_per_iteration": measured.ms_per_iter, "warmup": settings.warmup, "iterations": settings.iterations}


def build(target, injected: dict, window: tuple, calibrated: dict, applied: Optional[dict],
          backend: str = "nsys", bare: Optional[dict] = None) -> dict:
    """``backend``: what recorded the trace ("nsys", "torch.profiler"); the untraced baseline
    ran under nsys (attached, not collecting) or under no profiler at all (torch.profiler).
    ``bare``: the eager loop timed in fresh processes without a profiler (bare_baseline)."""
    counts = {k: v for k, v in injected.items() if k != "untraced"}
    extra = {"bare_baseline": bare} if bare else {}
    return {
        "schema": SCHEMA,
        "backend": backend,
        "script": target.label,
        "argv": list(target.argv),
        "window": {"warmup": window[0], "iterations": window[1]} if window else None,
        "untraced": injected.get("untraced") or {},
        "calibration": calibrated,
        "applied": applied,
        "bootstrap": counts,
        **extra,
    }


def write(path: Path, record: dict) -> None:
    atomic_write(Path(path), (json.dumps(record, indent=1) + "\n").encode("utf-8"))


def read(path) -> Optional[dict]:
    """The record at ``path``; None when there is none; a damaged one is one clear line."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise CgAdviseError(f"{path}: not a cg-advise run record (damaged JSON): move it away or profile again") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise CgAdviseError(f"{path}: not a {SCHEMA} run record: move it away or profile again")
    return record


def measured_eager_ms(record: Optional[dict]) -> Optional[float]:
    """The untraced eager ms/iteration the bootstrap timed (the GPU timeline), if any."""
    untraced = (record or {}).get("untraced") or {}
    value = untraced.get("gpu_ms_per_iteration") or untraced.get("host_ms_per_iteration")
    return float(value) if value and value > 0 else None


def read_beside(report) -> Optional[dict]:
    """The record beside a report or its export, if any."""
    from .profile import run_record_path

    return read(run_record_path(report))
