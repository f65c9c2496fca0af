"""Each candidate in its own process (a failed capture can poison the CUDA context): the
patched script runs under the harness beside the original, so its imports and relative
paths still work, and is removed afterwards."""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

from advisor.profile import PACKAGE_PARENT

from .errors import classify
from .harness import ENV, TIMING_DONE, Settings
from .patch import make_patch
from .search import ALLREDUCE_OUTSIDE, Candidate

GRAPH_SCOPES = ("full_iteration", ALLREDUCE_OUTSIDE, "fwd_bwd", "submodule", "forward")   # compile may legitimately not graph
DEFAULT_TOLERANCE = 1e-3   # max |candidate - eager| / max |eager| over all parameters


def run_candidate(script: Path, args: list, scope: str, settings: Settings, workdir: Path,
                  timeout: float, python: str = sys.executable, target: Optional[Path] = None,
                  step: Optional[str] = None, launcher: Optional[list] = None) -> tuple:
    """(Candidate, snapshot path or None) for one scope; eager runs the script as it is, and so
    does a given ``target`` (an already patched script). Under a ``launcher`` (torchrun and its
    arguments) every rank runs the harness: the snapshot is then a list, one per rank."""
    candidate = Candidate(scope)
    given, target = target is not None, target or script
    if scope != "eager" and not given:
        try:
            patched = make_patch(script, scope, step=step).patched_bytes
        except Exception as error:  # a refused rewrite is a result
            candidate.status, candidate.failure = "failed", {"kind": "not-applicable", "message": str(error)}
            return candidate, None
        target = patched_copy(script, scope, patched)
    ranked = ".{rank}" if launcher else ""   # the harness of each rank writes its own files
    snapshot = workdir / f"{scope}{ranked}.params.pt"
    result = workdir / f"{scope}{ranked}.json"
    env = {**os.environ, ENV: json.dumps(asdict(Settings(**{**asdict(settings), "snapshot": str(snapshot),
                                                            "script_dir": str(script.parent.resolve())}))),
           "PYTHONPATH": PACKAGE_PARENT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    harness = ["-m", "tuner.harness", str(result), str(target), *args]
    try:
        stderr, returncode = _launch(([*launcher] if launcher else [python]) + harness, env, timeout, launcher,
                                     stale=lambda: [old.unlink() for old in workdir.glob(f"{scope}.*json")])
    finally:
        if target != script and not given:
            target.unlink(missing_ok=True)
    data = read_ranks(workdir, scope) if launcher else json.loads(result.read_text()) if result.exists() else {}
    candidate.ms_per_iter = data.get("ms_per_iter")
    candidate.peak_mb = data.get("peak_mb")
    candidate.stochastic = bool(data.get("stochastic"))
    candidate.window_ms = data.get("window_ms") or None
    candidate.rank_ms = data.get("rank_ms")
    candidate.paired_speedup = data.get("paired_speedup")
    candidate.paired_ratios = data.get("paired_ratios") or None
    eager_windows = data.get("eager_window_ms") or []
    candidate.paired_eager_ms = statistics.median(eager_windows) if eager_windows else None
    after_timing = TIMING_DONE in stderr
    # measured, then: the script's end (0), a timeout in the rest of the script, or, where the
    # script was not to run to its end (a baseline, a reference run), whatever its rest did
    if data.get("complete") and (returncode == 0 or (after_timing and (returncode is None or not settings.to_end))):
        candidate.status = "ok"
        if returncode is None:   # measured, but the rest of the script outlasted the timeout
            candidate.note = (f"the end of the script was not reached within {timeout:.0f} s after timing; pass it "
                              "fewer steps to check the code after the loop too")
        replays, steps = data.get("graph_replays") or 0, data.get("steps") or 0
        graphed_steps = steps - (data.get("eager_steps") or 0)   # a paired timing's eager windows replay nothing
        if scope in GRAPH_SCOPES and not replays:
            candidate.status = "failed"   # the rewrite's own CPU fallback ran: this is not the scope
            candidate.failure = {"kind": "ran-eagerly", "message": "the rewrite never replayed a CUDA graph (the "
                                 "step's tensors are not on a CUDA device, or not tensors), so it ran eagerly"}
        elif scope in GRAPH_SCOPES and replays < graphed_steps // 2:
            candidate.status = "failed"   # each iteration replays one graph at least
            candidate.failure = {"kind": "ran-eagerly", "message": f"the graph replayed on {replays} of "
                                 f"{graphed_steps} graphed steps: an input that changes every iteration (a Python number, a batch of "
                                 "another shape) made the others run eagerly"}
    else:
        candidate.status = "failed"
        if returncode is None:
            candidate.failure = {"kind": "timeout", "message": stderr.strip().splitlines()[-1]}
        elif returncode == 0:  # the script ended before the harness had what it needs
            candidate.failure = {"kind": "incomplete", "message": data.get("note", ""), "steps": data.get("steps")}
        else:
            candidate.failure = classify(stderr.split(TIMING_DONE, 1)[-1]).to_dict()
            where = candidate.failure.get("where") or ""
            if target != script and where.startswith(str(target)):  # the rewrite is gone: name it
                candidate.failure["where"] = f"{script}:{where.rsplit(':', 1)[1]} of the {scope} rewrite"
            if after_timing:
                candidate.failure = after_the_loop(candidate.failure, scope)
    if settings.paired and candidate.status == "ok" and not data.get("paired"):
        why = data.get("unpaired_why") or "its process did not say why"
        candidate.note = " ".join(filter(None, [candidate.note, f"not timed paired ({why}): timed against the "
                                                                "eager process"]))
    candidate.window_steps = data.get("window_steps") or None
    # the script's length where it ran to its end (a run stopped at a timeout counted fewer)
    candidate.steps = (data.get("steps") or None) if returncode == 0 else None
    if candidate.status == "ok" and data.get("paired") and data.get("short_windows"):
        candidate.note = " ".join(filter(None, [candidate.note, SHORT_WINDOWS_NOTE.format(data["window_steps"])]))
    elif candidate.status == "ok" and data.get("paired") and settings.stretch_steps:
        candidate.note = " ".join(filter(None, [candidate.note, ONE_PAIR_NOTE.format(data.get("window_steps"))]))
    snapshots = data.get("snapshot")
    return candidate, ([Path(p) for p in snapshots] if isinstance(snapshots, list) else
                       Path(snapshots) if snapshots else None)


# a paired timing whose graphed windows stayed short (Measurement.short_windows)
SHORT_WINDOWS_NOTE = ("timed in windows of {} steps by turns with eager ones, the script too short for longer "
                      "windows: these read a graph up to 1.6x slower than your loop replaying it throughout, so this "
                      "speedup is likely low; run the script with more steps to time it as your loop runs")


# processes for a scope timed in one pair (a script too short for long paired windows) where
# --runs does not say: their median. On a lone H200, ten short loops' full_iteration timed in
# three processes each read speedups up to 1.69x apart within one tune (main_guard 23.0x, 31.3x,
# 38.8x), the eager loop's own pace moving with the process (0.33-0.64 ms a step); one process
# fell within 20 % of the other two's median for 22 of 30 (bench/results/paired_timing/
# h200_one_pair_runs_2026-12-01/). Over the H200 sets, a tune timed in one pair fell within 20 %
# of the same loop's other such tunes for 75 of 103, one timed in several long pairs 59 of 63
# (bench/unseen_eval.py): one process does for those (tune.runs_for).
ONE_PAIR_RUNS = 3

# the budget an optional process (one past --runs, run_repeated) needs left: this many times
# the candidate's first process, so that the tuner's own extra processes never starve the
# candidates still to come (tune runs at most five, the eager one first)
OPTIONAL_RUN_ROOM = 8

# a paired timing of one graphed and one eager window (tune.paired_settings: a short script)
ONE_PAIR_NOTE = ("timed in one pair of {}-step windows, graphed then eager, the script too short for more pairs: "
                 "one pair moves more from process to process than several, so tune takes the median of "
                 f"{ONE_PAIR_RUNS} processes unless --runs says how many")


def patched_copy(script: Path, scope: str, patched: bytes) -> Path:
    """The rewrite, written beside the script (its imports and relative paths resolve as the
    script's do) under a name no other run takes: two tunes of one script at once (one a GPU,
    the same script with other arguments) each remove only their own copy. With one name for
    all, a tune that finished first removed the copy another was about to start, which then
    failed as "other" (four dataset collectors on one zoo script, 2026-11-27)."""
    handle, name = tempfile.mkstemp(prefix=f".cg_tune_{scope}_", suffix=f"_{script.name}", dir=script.parent)
    with os.fdopen(handle, "wb") as file:
        file.write(patched)
    return Path(name)


RELAUNCH_ON = ("address already in use", "EADDRINUSE", "terminate called without an active exception")


def _launch(command: list, env: dict, timeout: float, launcher: Optional[list], stale) -> tuple:
    """_run after ``stale()`` (a rank that dies early must not leave an old result), with
    torchrun given a free port unless the user gave one. A port found free can be taken before
    torchrun binds it, and Gloo can abort a rank at teardown on a loaded machine
    (pytorch/pytorch#179291): a launch that failed for either reason gets one more try."""
    stale()
    if not launcher:
        return _run(command, env, timeout)
    chosen = "PET_MASTER_PORT" not in env and not any(a.startswith(("--master-port", "--master_port"))
                                                       for a in launcher)
    for _ in range(2):
        tried = {**env, "PET_MASTER_PORT": str(free_port())} if chosen else env
        stderr, returncode = _run(command, tried, timeout)
        if returncode in (0, None) or not any(sign in stderr for sign in RELAUNCH_ON):
            break
        stale()
    return stderr, returncode


def _run(command: list, env: dict, timeout: float) -> tuple:
    """(stderr, exit code or None on a timeout). The command runs in its own process group,
    killed whole on a timeout: torchrun's workers must not outlive it."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                               errors="replace", start_new_session=True)
    try:
        _, stderr = process.communicate(timeout=timeout)
        return stderr, process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        return f"{stderr}\ntimed out after {timeout:.0f} s", None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def read_ranks(workdir: Path, scope: str) -> dict:
    """Every rank's measurement as one: complete when each rank of the world completed, the
    slowest rank's ms/iteration (every rank waits for it at each all-reduce), the largest
    peak memory, the fewest steps and graph replays, and each rank's snapshot, in rank order."""
    ranks = []
    for path in workdir.glob(f"{scope}.*.json"):
        try:
            ranks.append(json.loads(path.read_text()))
        except ValueError:   # a rank killed while it wrote
            continue
    if not ranks:
        return {}
    ranks.sort(key=lambda r: r.get("rank", 0))
    world = max(r.get("world_size", 1) for r in ranks)
    timed = [r["ms_per_iter"] for r in ranks if r.get("ms_per_iter") is not None]
    slowest = max(ranks, key=lambda r: r.get("ms_per_iter") or 0.0)
    complete = len(ranks) == world and all(r.get("complete") for r in ranks)
    snapshots = [r.get("snapshot") for r in ranks]
    return {
        "complete": complete,
        "ms_per_iter": max(timed) if complete else None,
        "rank_ms": [r.get("ms_per_iter") for r in ranks],
        "window_ms": slowest.get("window_ms"),
        "peak_mb": max((r["peak_mb"] for r in ranks if r.get("peak_mb") is not None), default=None),
        "stochastic": any(r.get("stochastic") for r in ranks),
        "graph_replays": min(r.get("graph_replays") or 0 for r in ranks),
        "steps": min(r.get("steps") or 0 for r in ranks),
        "snapshot": snapshots if complete and all(snapshots) else None,
        "note": next((r["note"] for r in ranks if r.get("note")), "")
        + ("" if len(ranks) == world else f" ({len(ranks)} of {world} ranks wrote a result)"),
    }


def over_budget(scope: str) -> Candidate:
    return Candidate(scope, status="skipped", failure={"kind": "budget", "message": "the time budget ran out while "
                                                                                    "it ran (--budget)"})


def after_the_loop(failure: dict, scope: str) -> dict:
    """A failure once the timed steps were done: the code after the loop broke, which in a
    user's run would come at the very end of training."""
    what = failure.get("message") or "an error"
    where = f" at {failure['where']}" if failure.get("where") else ""
    script = "the script" if scope == "eager" else "the patched script"
    return {**failure, "kind": "after-the-loop", "meaning": "in a full run this comes at the very end of training",
            "message": f"{script} failed after the loop: {what}{where}",
            "fix": "the rewrite broke code that runs after the training loop; please report it"
                   if scope != "eager" else "the script itself fails at its end: fix it, or tune with --step"}


def run_repeated(script: Path, args: list, scope: str, settings: Settings, workdir: Path, timeout: float,
                 runs: int = 1, target: Optional[Path] = None, step: Optional[str] = None,
                 python: str = sys.executable, deadline: Optional[float] = None,
                 launcher: Optional[list] = None, required: Optional[int] = None) -> tuple:
    """The candidate run ``runs`` times, each in a fresh process: ms/iteration is the median
    (a host-bound loop's timing varies from process to process), peak memory the largest;
    the first failure ends it. Processes past ``required`` (default: all) are the tuner's own
    choice, not the user's: each runs only while the budget leaves OPTIONAL_RUN_ROOM times the
    first process's wall time (room for the candidates still to come), and where the budget
    runs out before them, those measured stand."""
    measured = []
    required = max(1, runs if required is None else required)
    first_s = None
    for _ in range(max(1, runs)):
        left = timeout if deadline is None else min(timeout, deadline - time.monotonic())
        optional = len(measured) >= required
        if optional and deadline is not None and left < OPTIONAL_RUN_ROOM * first_s:
            break   # the tuner's own process gives way (no budget left included)
        if left <= 0:
            return over_budget(scope), None
        began = time.monotonic()
        candidate, snapshot = run_candidate(script, args, scope, settings, workdir, left, python=python,
                                            target=target, step=step, launcher=launcher)
        if first_s is None:
            first_s = time.monotonic() - began
        if candidate.status != "ok" and (candidate.failure or {}).get("kind") == "timeout" and left < timeout:
            if optional:
                break
            return over_budget(scope), None    # stopped by the budget, not by a hang of its own
        if candidate.status != "ok":
            return candidate, snapshot
        measured.append((candidate, snapshot))
    candidate, snapshot = measured[0]
    candidate.run_ms = [c.ms_per_iter for c, _ in measured]
    candidate.ms_per_iter = statistics.median(candidate.run_ms)
    paired = [c.paired_speedup for c, _ in measured]
    candidate.paired_speedup = statistics.median(paired) if all(paired) else None
    candidate.paired_runs = paired if all(paired) and len(paired) > 1 else None
    eager_ms = [c.paired_eager_ms for c, _ in measured]
    candidate.paired_eager_ms = statistics.median(eager_ms) if all(eager_ms) else None
    candidate.peak_mb = max((c.peak_mb for c, _ in measured if c.peak_mb is not None), default=None)
    candidate.steps = min((c.steps for c, _ in measured if c.steps), default=None)
    return candidate, snapshot


def max_relative_difference(reference, other) -> float:
    """Max |other - reference| / max |reference| over all parameters; for lists of snapshots
    (one per rank), the largest over the ranks."""
    if isinstance(reference, list) or isinstance(other, list):
        return max(rank_differences(reference, other))
    import torch

    a, b = torch.load(reference), torch.load(other)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return float("inf")
    scale = max(float(x.abs().max()) for x in a) or 1.0
    return max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b)) / scale


def rank_differences(reference, other) -> list:
    """Each rank's difference from the same rank of the reference; inf if the ranks differ."""
    if not isinstance(reference, list) or not isinstance(other, list) or len(reference) != len(other):
        return [float("inf")]
    return [max_relative_difference(a, b) for a, b in zip(reference, other)]


# a scope whose difference from eager is within this many times eager's difference from
# itself is not failed: two eager runs of a loop with kernels that do not repeat bit for bit
# (atomics in a convolution's or a pooling's backward; Adam turns their tiny gradient noise
# into whole steps of the learning rate) differ by as much as a correct graph does, while the
# rewrites' real faults measured so far (a learning rate baked into a graph, optimizer state
# left by the warm-up) differed by 1e-2 and more
EAGER_SPREAD_FACTOR = 3


def check_against_eager(candidate: Candidate, eager_snapshot, snapshot, tolerance: float,
                        stochastic: bool = False, eager_own: Optional[Callable[[], Optional[float]]] = None) -> None:
    """Parameters (or outputs) after the check steps against eager's. With dropout active in
    eager (``stochastic``) a difference is flagged, not failed: a graph draws other random
    numbers than eager. Over the tolerance, ``eager_own`` (called then only: it runs eager
    again) gives eager's difference from itself; a difference within EAGER_SPREAD_FACTOR times
    that is flagged too."""
    if candidate.status != "ok" or eager_snapshot is None or snapshot is None:
        return
    if isinstance(snapshot, list):   # one snapshot per rank: each loaded once
        candidate.rank_differences = rank_differences(eager_snapshot, snapshot)
        difference = max(candidate.rank_differences)
    else:
        difference = max_relative_difference(eager_snapshot, snapshot)
    candidate.correct = difference <= tolerance
    if candidate.correct:
        return
    if stochastic:
        _unchecked(candidate, "unchecked-stochastic",
                   f"the step draws random numbers (dropout, an RNN's dropout, sampled noise): a graph draws others than eager's, so "
                   f"the parameters differ too ({difference:.2e}); not compared. Check the loss curve, or tune with "
                   f"dropout off to compare")
        return
    own = eager_own() if eager_own is not None else None
    if own and difference <= EAGER_SPREAD_FACTOR * own:
        _unchecked(candidate, "unchecked-nondeterministic",
                   f"eager differs from itself by {own:.2e} after the check steps (kernels that do not repeat bit "
                   f"for bit); this scope by {difference:.2e}, within {EAGER_SPREAD_FACTOR}x that: not failed")
        return
    candidate.status = "mismatch"
    candidate.failure = {"kind": "mismatch", "message": f"parameters differ from eager by {difference:.2e} "
                                                        f"(relative, tolerance {tolerance:.0e}) after the check steps"}


def _unchecked(candidate, kind: str, message: str) -> None:
    """Neither correct nor failed: the comparison with eager cannot decide (and why)."""
    candidate.correct = None
    candidate.failure = {"kind": kind, "message": message}


def steps_optimizer_in_graph(script: Path, scope: str, step: Optional[str] = None) -> bool:
    """Whether ``scope``'s rewrite holds the optimizer step in its graph (and so builds the
    optimizer capturable): full_iteration, unless patch leaves the step eager."""
    if not scope.startswith("full_iteration"):
        return False
    try:
        return make_patch(script, scope, step=step).steps_optimizer_in_graph
    except Exception:  # a refused rewrite never ran
        return False


def matches_capturable(candidate: Candidate, reference, snapshot, tolerance: float) -> None:
    """A full-iteration graph of the optimizer step that differs from plain eager, set against
    eager with capturable optimizers (``reference``): within the tolerance it is correct, the
    difference being the capturable implementation's other rounding (the super-resolution
    example's Adam: 1.7e-3 from plain eager after 5 steps, every time)."""
    if reference is None or snapshot is None:
        return
    difference = max_relative_difference(reference, snapshot)
    if difference > tolerance:
        return
    candidate.status, candidate.correct = "ok", True
    candidate.failure = {"kind": "capturable-reference",
                         "message": f"{candidate.failure['message']}; within {difference:.2e} of eager with capturable "
                                    "optimizers, which the rewrite builds: the same update, other roundings"}


def new_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="cg-advise-tune-"))
