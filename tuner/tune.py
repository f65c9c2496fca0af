"""`cg-advise tune`: eager and each capture scope of the user's own script, measured on the
GPU in separate processes, checked against eager, ranked; the result is saved for `patch`."""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from advisor.errors import CgAdviseError
from advisor.patching import file_digest, tune_result_path
from advisor.sourcefile import write_text

from .discover import discover
from .harness import MAX_PAIRED_WINDOW, Settings, step_counting
from .runner import (DEFAULT_TOLERANCE, ONE_PAIR_RUNS, check_against_eager, matches_capturable, max_relative_difference, new_workdir,
                     run_repeated, steps_optimizer_in_graph)
from .ddp import uses_ddp
from .search import DDP_ORDER, INFERENCE_ORDER, choose, plan, scopes_for

SCHEMA = "cg-advise.tune/1"


@dataclass
class TuneOptions:
    scopes: Optional[tuple] = None     # None: every scope of the loop's kind
    exhaustive: bool = False
    budget_s: float = 900.0
    candidate_timeout_s: float = 300.0
    settings: Settings = field(default_factory=Settings)
    tolerance: float = DEFAULT_TOLERANCE
    predictions: Optional[dict] = None
    gpu_busy_ms: Optional[float] = None
    runs: Optional[int] = None         # processes per candidate (median); None: 1, ONE_PAIR_RUNS where timed in one pair
    step: Optional[str] = None         # --step [module:]function: where the loop is
    keep_workdir: bool = False         # keep each candidate's measurement and snapshot for inspection
    python: str = sys.executable       # the interpreter that runs the user's script (its torch)
    launcher: list = field(default_factory=list)   # torchrun and its arguments: every candidate runs on all ranks
    paired: bool = True                # PAIRED_SCOPES timed alternating with eager windows in their process


ALL_SCOPES = tuple(dict.fromkeys(DDP_ORDER + INFERENCE_ORDER))
# scopes whose graphs have an eager path the harness can switch to for a window (the modules
# make_graphed_callables graphs; the full-iteration helper's step; what torch.compile compiled),
# so they are timed paired (tuner/harness.py)
PAIRED_SCOPES = ("fwd_bwd", "submodule", "full_iteration", "compile")


def parse_scopes(text: Optional[str]) -> Optional[tuple]:
    """``--scopes a,b`` as a tuple of known scope names; an unknown one is one clear line."""
    if text is None:
        return None
    scopes = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in scopes if s not in ALL_SCOPES]
    if unknown or not scopes:
        raise CgAdviseError(f"--scopes {text!r}: unknown scope {', '.join(unknown) or '(none given)'} "
                            f"(choose from {', '.join(ALL_SCOPES)})")
    return scopes


def find_step(script, options: TuneOptions):
    """The loop to tune, found before anything runs, so that a script without a loop, a wrong
    ``--step`` or a scope of the other kind is said at once (no GPU needed for that)."""
    script = Path(script)
    spec = discover(script, step=options.step)
    inference = spec.kind == "inference"
    kind_scopes = scopes_for(spec.kind, uses_ddp(script, spec))
    wrong = [s for s in options.scopes or () if s not in kind_scopes]
    if wrong:
        raise CgAdviseError(f"scope {', '.join(wrong)} does not apply to {'an inference' if inference else 'a training'} "
                            f"loop (its scopes: {', '.join(kind_scopes)})")
    folder = script.resolve().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CgAdviseError(f"{folder}: not writable (tune runs each rewrite beside the script and saves its result "
                            "there): copy the script's folder somewhere writable")
    return spec


def tune(script, args: list, options: TuneOptions, progress: Callable[[str], None], spec=None) -> dict:
    """Runs the candidates within ``budget_s``; the result is saved after each candidate (marked
    partial until the last), so an interrupted or over-budget tune still leaves what it measured;
    the work folder goes unless ``keep_workdir``; nothing is saved if the script changed."""
    script = Path(script)
    digest = file_digest(script)
    spec = spec or find_step(script, options)
    workdir = new_workdir()

    def save(saved: dict, partial: bool) -> dict:
        saved.update(sha256=digest, partial=partial, workdir=str(workdir) if options.keep_workdir else None)
        if file_digest(script) != digest:
            raise CgAdviseError(f"{script} changed while it was being tuned: the result is not saved; tune again")
        write_text(tune_result_path(script), json.dumps(saved, indent=1) + "\n")
        return saved

    try:
        saved = _tune(script, args, options, progress, spec, workdir, lambda partial: save(partial, True))
    finally:
        if not options.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return save(saved, False)


def uncounted_steps(spec, scope: str) -> str:
    """Why ``scope`` cannot be timed against eager, or "": a loop without an optimizer is counted
    by its backward() calls, and where an iteration makes a varying number of them (a backward
    under a condition), a full-iteration graph's replays and eager's steps would not be the same
    iterations, at the correctness check or in the timing."""
    if scope != "full_iteration" or spec.kind != "train" or spec.optimizer or spec.backwards:
        return ""
    return ("the loop has no optimizer and its iterations make a varying number of backward() calls "
            "(one under a condition or in a loop of unknown length): its iterations cannot be counted "
            "to compare a full-iteration graph with eager")


def _tune(script: Path, args: list, options: TuneOptions, progress, spec, workdir: Path, save_partial) -> dict:
    inference = spec.kind == "inference"
    progress(f"{'inference' if inference else 'training'} step: {spec.describe()}")
    kind_scopes = scopes_for(spec.kind, uses_ddp(script, spec))
    settings = Settings(**{**asdict(options.settings), "kind": spec.kind, **step_counting(spec.to_dict())})
    deadline = time.monotonic() + options.budget_s

    # an inference loop's compile is timed against the eager process: the harness pairs
    # training steps only, and would say so on every inference run
    pairs = options.paired and not options.launcher and not inference
    paired_timing = {}   # scope -> its paired Settings (paired_settings), once the eager run has counted the steps

    def measure(scope: str, step=None, timing: Optional[Settings] = None):
        if timing is None and scope in PAIRED_SCOPES and pairs:
            timing = paired_timing.get(scope) or paired_settings(settings, script_steps)
        return run_repeated(script, args, scope, timing or settings, workdir, options.candidate_timeout_s,
                            runs_for(options.runs, timing), step=step, python=options.python, deadline=deadline,
                            launcher=options.launcher, required=options.runs or 1)

    eager, eager_snapshot, settings = time_eager(lambda timing: measure("eager", timing=timing), settings, progress)
    script_steps = eager.steps if settings.to_end else None   # the script's length (paired_settings)
    failure = eager.failure or {}
    if eager.status != "ok" and failure.get("kind") == "after-the-loop":
        raise CgAdviseError(f"{script} fails after its training loop, unpatched: "
                            f"{failure['message']}; fix it or give tune fewer steps that end cleanly")
    if eager.status != "ok" and failure.get("kind") == "budget":
        raise CgAdviseError(f"the eager run of {script} did not finish within --budget {options.budget_s:g} s: "
                            "give a larger budget, or the script fewer steps")
    if eager.status != "ok":
        steps = "model calls" if inference else "training steps"
        hint = (f"; run it longer (its own arguments pass through: cg-advise tune {script.name} --steps N)"
                if failure.get("kind") == "incomplete" else "")
        raise CgAdviseError(f"{script} does not complete {settings.warmup + settings.iterations} {steps} under the "
                            f"harness: {failure.get('message') or failure.get('kind')}{hint}")
    progress(f"eager: {eager.ms_per_iter:.3f} ms/iteration")
    planned = plan(options.predictions, options.exhaustive, tuple(s for s in kind_scopes
                                                                  if s in (options.scopes or kind_scopes)))
    # each scope's graphed step as predicted, where a profile predicted it, sizes its long windows
    paired_timing.update({c.scope: paired_settings(settings, script_steps,
                                                   eager.ms_per_iter / c.predicted if c.predicted else None)
                          for c in planned if c.scope in PAIRED_SCOPES})
    in_one_pair = [c.scope for c in planned if c.status != "skipped" and c.scope in paired_timing
                   and paired_timing[c.scope].stretch_steps]
    if pairs and in_one_pair:
        window = paired_timing[in_one_pair[0]].iterations // 2
        processes = runs_for(options.runs, paired_timing[in_one_pair[0]])
        each = (f", each in {processes} processes (their median: one pair moves from process to process)"
                if processes > 1 else "")
        progress(f"the script runs {script_steps} steps, too few for long paired windows: {', '.join(in_one_pair)} "
                 f"timed in one pair of {window}-step windows, graphed then eager{each}")

    def result_of(candidates) -> dict:
        result = choose(eager.ms_per_iter, candidates, options.gpu_busy_ms, eager.spread)
        return {
            "schema": SCHEMA,
            "script": str(script),
            "args": list(args),
            "winner": result.winner,
            "note": result.note,
            "eager_ms": eager.ms_per_iter,
            "eager_run_ms": eager.run_ms,
            "eager_window_ms": eager.window_ms,   # the timed windows of its (slowest) process: with --runs 1
                                                  # its spread is read from them, and the note's margin shows it
            "eager_rank_ms": eager.rank_ms,
            "launcher": list(options.launcher),
            "runs": options.runs or 1,
            "eager_peak_mb": eager.peak_mb,
            "gpu_busy_ms": options.gpu_busy_ms,
            "timing": {"warmup": settings.warmup, "iterations": settings.iterations, "repeats": settings.repeats,
                       "min_seconds": settings.min_seconds},
            "tolerance": options.tolerance,
            "step": spec.to_dict(),
            "rows": result.to_dict()["rows"],
        }

    references = {}

    def short_eager(kind: str, why: str, **changes):
        """Eager run again to its check steps (a short run, once a tune for each ``kind``, and
        only when a scope differs): its parameters' snapshot, or None where it failed."""
        if kind not in references:
            folder = workdir / kind
            folder.mkdir(exist_ok=True)
            progress(why)
            short = replace(settings, warmup=settings.check_steps, iterations=1, repeats=1, min_seconds=0.0,
                            to_end=False, **changes)
            again, snapshot = run_repeated(script, args, "eager", short, folder, options.candidate_timeout_s,
                                           python=options.python, deadline=deadline, launcher=options.launcher)
            references[kind] = snapshot if again.status == "ok" else None
        return references[kind]

    def eager_own() -> Optional[float]:
        """Eager's difference from itself at the check steps."""
        again = short_eager("eager_again", "a scope differs from eager: running eager again to its check steps, "
                                           "to see how far eager differs from itself")
        return None if again is None or eager_snapshot is None else max_relative_difference(eager_snapshot, again)

    def capturable_reference():
        """Eager with capturable optimizers, as a full-iteration graph of the optimizer step runs
        them (patch builds the optimizer capturable): what such a graph is compared with where
        plain eager differs."""
        return short_eager("eager_capturable", "full_iteration differs from eager: running eager with capturable "
                                               "optimizers, as the graph steps them, to its check steps", capturable=True)

    candidates = []
    for candidate in planned:
        candidates.append(candidate)
        uncounted = uncounted_steps(spec, candidate.scope)
        if uncounted:
            candidate.status, candidate.failure = "skipped", {"kind": "uncounted-steps", "message": uncounted}
            progress(f"{candidate.scope}: skipped ({uncounted})")
            continue
        if candidate.status == "skipped":
            progress(f"{candidate.scope}: skipped (predicted {candidate.predicted:.2f}x; --exhaustive tries it)")
            continue
        if time.monotonic() >= deadline:
            candidate.status = "skipped"
            candidate.failure = {"kind": "budget", "message": f"time budget of {options.budget_s:.0f} s spent"}
            progress(f"{candidate.scope}: skipped (time budget spent)")
            continue
        progress(f"{candidate.scope}: running ...")
        measured, snapshot = measure(candidate.scope, options.step)
        measured.predicted = candidate.predicted
        measured.bind_to_eager(eager.ms_per_iter, options.gpu_busy_ms)
        # random draws: an active dropout module in eager, or the candidate's graphs drawing
        stochastic = eager.stochastic or measured.stochastic
        check_against_eager(measured, eager_snapshot, snapshot, options.tolerance, stochastic)
        if measured.status == "mismatch" and steps_optimizer_in_graph(script, measured.scope, options.step):
            # a graph of the optimizer step: against eager with capturable optimizers first (the same kernels: tight)
            matches_capturable(measured, capturable_reference(), snapshot, options.tolerance)
        if measured.status == "mismatch":   # then against eager's own run-to-run difference
            measured.status, measured.correct, measured.failure = "ok", None, None
            check_against_eager(measured, eager_snapshot, snapshot, options.tolerance, stochastic, eager_own)
        candidates[-1] = candidate = measured
        paired = (f" (timed paired with eager in its process: {candidate.measured_ms:.3f} ms/iteration there)"
                  if candidate.measured_ms is not None else "")
        progress(f"{candidate.scope}: " + (f"{candidate.ms_per_iter:.3f} ms/iteration, "
                                           f"{eager.ms_per_iter / candidate.ms_per_iter:.2f}x{paired}"
                                           if candidate.status == "ok" else
                                           f"{candidate.status} ({(candidate.failure or {}).get('kind')})"))
        save_partial(result_of(candidates))
    saved = result_of(candidates)
    if saved["note"]:
        progress(saved["note"])
    return saved


def time_eager(measure, settings: Settings, progress=lambda line: None) -> tuple:
    """(candidate, snapshot, settings) of the eager run that ``measure(settings)`` times; a
    script of fewer steps than the window is timed again over the steps it has (fit_window),
    and ``progress`` told so. tune's eager run, and profile --baseline-runs."""
    eager, snapshot = measure(settings)
    shorter = fit_window(settings, (eager.failure or {}).get("steps")) if eager.status != "ok" else None
    if not shorter:
        return eager, snapshot, settings
    progress(f"the script runs {eager.failure['steps']} steps: timing {shorter.iterations} after "
             f"{shorter.warmup} warm-up steps instead of {settings.iterations} after {settings.warmup}")
    return (*measure(shorter), shorter)


def fit_window(settings: Settings, steps) -> Optional[Settings]:
    """Settings that time a script of only ``steps`` steps (20 at least), or None."""
    if not steps or steps < 20:
        return None
    warmup = min(settings.warmup, max(2, steps // 10))
    iterations = steps - warmup - max(1, steps // 20)  # a margin: a GradScaler may skip a step
    return Settings(**{**asdict(settings), "warmup": warmup, "iterations": iterations,
                       "repeats": max(1, min(settings.repeats, iterations // 4)),
                       "check_steps": min(settings.check_steps, warmup + iterations)})


def runs_for(runs: Optional[int], timing: Optional[Settings]) -> int:
    """The processes a candidate runs in: ``runs`` where --runs gave it, else ONE_PAIR_RUNS for a
    scope timed in one pair (``paired_settings`` gave it stretches) and 1 for any other."""
    if runs:
        return runs
    return ONE_PAIR_RUNS if timing is not None and timing.paired and timing.stretch_steps else 1


def paired_settings(settings: Settings, script_steps: Optional[int], graphed_ms: Optional[float] = None) -> Settings:
    """Settings that time a graph scope paired with eager in its process. Past tune's minimum
    (windows of 10 steps by turns) the harness measures long windows once two pairs of them
    fit; a script that ends before (the eager run, to its end, counted ``script_steps``) was
    measured in the minimum's windows, which read a graph 1.13-1.58x its ms/iteration when it
    replays throughout on the lent H100, all but the first: the graphed window before any
    eager one reads it as the loop does (the DCGAN's 0.418-0.465 ms against 0.446-0.459,
    bench/results/paired_windows_h100/). Such a script is timed in one pair, a graphed window
    and then an eager one, each half the steps past the warm-up (less fit_window's margin),
    each read as the median of its stretches of the minimum's window (``stretch_steps``), so
    that the loop's periodic work (an evaluation each epoch) does not weigh on one side alone.

    The long windows last ``paired_window_ms`` of graphed steps (at most MAX_PAIRED_WINDOW
    steps): sized here from ``graphed_ms``, the predicted graphed step where a profile gave one,
    halved (a graph faster than predicted wants longer windows), else the most they take. A
    step slow enough that the minimum's windows already last that long keeps them."""
    paired = replace(settings, paired=True)
    if not script_steps:
        return paired
    stretch = max(1, settings.iterations // (2 * settings.repeats))   # the minimum's window
    long = (min(MAX_PAIRED_WINDOW, math.ceil(settings.paired_window_ms / (graphed_ms / 2)))
            if graphed_ms else MAX_PAIRED_WINDOW)
    left = script_steps - settings.warmup - max(1, script_steps // 20)
    window = left // 2
    if long <= stretch or left >= settings.iterations + 4 * long or window < 3 * stretch:
        return paired   # the minimum's windows are long enough, long windows pair up, or the pair would be short
    return replace(paired, iterations=2 * window, repeats=1, stretch_steps=stretch)


def run_spreads(saved: dict) -> dict:
    """scope -> (max/min of its per-process times, its processes) (of a paired scope, its per-process speedups),
    when each ran in several processes: how far
    the same code's timing moves between runs on this machine (a host-bound loop's by 10-60 %
    on a shared host), so how close two speedups can be and still differ."""
    runs = {"eager": saved.get("eager_run_ms") or []}
    # a scope timed paired: how far its processes' paired speedups moved (its own noise)
    runs.update({row["scope"]: row.get("paired_runs") or row.get("run_ms") or []
                 for row in saved["rows"] if row["status"] == "ok"})
    return {scope: (max(ms) / min(ms), len(ms)) for scope, ms in runs.items() if len(ms) > 1 and min(ms) > 0}


def result_table_rows(saved: dict) -> list:
    """(scope, ms, speedup, recovered, extra MB, correct, status) strings, best first."""
    rows = [("eager", f"{saved['eager_ms']:.3f}", "1.00x", "-", "-", "reference", "baseline")]
    for row in saved["rows"]:
        ms = f"{row['ms_per_iter']:.3f}" if row["ms_per_iter"] else "-"
        speedup = f"{row['speedup']:.2f}x" if row["speedup"] else "-"
        recovered = f"{row['recovered']:.0%}" if row["recovered"] is not None else "-"
        extra = (f"{row['peak_mb'] - saved['eager_peak_mb']:+.0f}" if row["peak_mb"] is not None
                 and saved.get("eager_peak_mb") is not None else "-")
        failure = row.get("failure") or {}
        correct = {"unchecked-stochastic": "not compared (random numbers)",
                   "unchecked-nondeterministic": "within eager's own spread",
                   "capturable-reference": "matches eager (capturable optimizer)"}.get(
            failure.get("kind"), {True: "matches eager", False: "MISMATCH", None: "-"}[row["correct"]])
        status = row["status"] + (f": {failure.get('kind')}" if failure else "")
        rows.append((row["scope"], ms, speedup, recovered, extra, correct, status))
    return rows
