"""`cg-advise tune` end to end on the CPU: the harness measures the real script, candidates
that cannot run here are recorded as failures, eager wins, the result is saved for patch."""

import json
import shutil
import subprocess
import statistics
import sys

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from advisor.patching import file_digest, tune_result_path
from conftest import ROOT, cuda_available, requires_cuda
from tuner.harness import Settings
from tuner.runner import max_relative_difference, new_workdir, run_candidate

SCRIPT = ROOT / "tests" / "scripts" / "train_cpu_steps.py"
SMALL = Settings(warmup=2, iterations=4, check_steps=2)


@pytest.fixture(autouse=True)
def _workdirs_in_tmp_path(tmp_path, monkeypatch):
    """tune's work folders (new_workdir) go under the test's own tmp_path, removed with it."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_harness_times_and_snapshots_a_real_script():
    candidate, snapshot = run_candidate(SCRIPT, ["--steps", "10"], "eager", SMALL, new_workdir(), 120)
    assert candidate.status == "ok" and candidate.ms_per_iter > 0 and snapshot.exists()
    again, same = run_candidate(SCRIPT, ["--steps", "10"], "eager", SMALL, new_workdir(), 120)
    other, different = run_candidate(SCRIPT, ["--steps", "10", "--lr", "0.02"], "eager", SMALL, new_workdir(), 120)
    assert max_relative_difference(snapshot, same) == 0.0  # seeded: the same run is bit-identical
    assert max_relative_difference(snapshot, different) > 1e-3


def test_harness_reports_failures_and_short_runs():
    failed, _ = run_candidate(SCRIPT, ["--fail-at", "3"], "eager", SMALL, new_workdir(), 120)
    assert failed.status == "failed" and failed.failure["kind"] == "sync-during-capture"
    assert failed.failure["where"].endswith("train_cpu_steps.py:18")
    short, _ = run_candidate(SCRIPT, ["--steps", "3"], "eager", SMALL, new_workdir(), 120)
    assert short.failure == {"kind": "incomplete", "message": "the script ended after 3 training steps; timing needs 6", "steps": 3}


def run(*args, env=None):
    result = CliRunner().invoke(cli, ["tune", *map(str, args)], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_tune_on_cpu_saves_a_result_and_keeps_eager(tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(SCRIPT, script)
    code, out, err = run("--scopes", "full_iteration,fwd_bwd", "--warmup", "2", "--iterations", "4",
                         "--check-steps", "2", "--json", script, "--steps", "10",
                         env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert code == 0, err
    saved = json.loads(out)
    assert saved == json.loads(tune_result_path(script).read_text())
    assert saved["winner"] == "eager" and saved["sha256"] == file_digest(script)
    assert saved["args"] == ["--steps", "10"] and saved["eager_ms"] > 0
    # eager's timed windows are kept, the median of them its time (what its spread is read from)
    windows = saved["eager_window_ms"]
    assert len(windows) >= 2 and saved["eager_ms"] == statistics.median(windows)
    # on a CPU the rewrites run their eager fallback: no graph was replayed, so they are not the scope
    assert {r["scope"]: (r["status"], r["failure"]["kind"]) for r in saved["rows"]} == {
        "full_iteration": ("failed", "ran-eagerly"), "fwd_bwd": ("failed", "ran-eagerly")}
    assert err.splitlines()[0] == (f"cg-advise: training step: for loop at {script}:16-22 at module level: model model, "
                                   "optimizer optimizer, loss loss, batch (?)")
    assert not list(tmp_path.glob(".cg_tune_*"))  # patched copies are removed


def test_a_tune_leaves_another_tunes_patched_copy_alone(tmp_path):
    """Two tunes of one script at once (four dataset collectors on one zoo script did): each
    writes and removes a patched copy of its own. Copies another tune has in the folder, by the
    name every tune once used and by a name of today's, are there, unchanged, when this one ends."""
    script = tmp_path / "train.py"
    shutil.copy(SCRIPT, script)
    others = {tmp_path / ".cg_tune_fwd_bwd_train.py": b"# another tune's copy\n",
              tmp_path / ".cg_tune_fwd_bwd_k2x9q_train.py": b"# and another's\n"}
    for path, text in others.items():
        path.write_bytes(text)
    candidate, _ = run_candidate(script, ["--steps", "10"], "fwd_bwd", SMALL, new_workdir(), 120)
    assert candidate.failure["kind"] == "ran-eagerly"   # it ran its own copy to the end (a CPU: no graph)
    assert {path: path.read_bytes() for path in tmp_path.glob(".cg_tune_*")} == others


def test_tune_budget_is_a_promise(tmp_path):
    """No run outlives the budget: a budget the eager run cannot fit in is said at once, and a
    candidate whose turn comes after the deadline is skipped, not started."""
    script = tmp_path / "train.py"
    shutil.copy(SCRIPT, script)
    code, out, err = run("--scopes", "fwd_bwd", "--budget", "0.001", "--warmup", "2", "--iterations", "4", "--json",
                         script, env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert code == 2 and err.splitlines()[-1] == (f"cg-advise: error: the eager run of {script} did not finish "
                                                  "within --budget 0.001 s: give a larger budget, or the script fewer steps")
    import time

    from tuner.runner import run_repeated

    skipped, snapshot = run_repeated(script, [], "fwd_bwd", SMALL, new_workdir(), 120, deadline=time.monotonic())
    assert snapshot is None and skipped.status == "skipped" and skipped.failure["kind"] == "budget"


@pytest.mark.skipif(cuda_available(), reason="checks the no-GPU refusal")
def test_tune_needs_cuda(tmp_path):
    code, out, err = run(SCRIPT)
    assert code == 4 and out == "" and err.startswith("cg-advise: error: no CUDA device visible")


def test_tune_refuses_modules_and_missing_scripts():
    assert run("--", "python3", "-m", "pkg")[0:3:2] == (2, "cg-advise: error: tune needs a script file, "
                                                          "not a module (its training loop is rewritten per scope)\n")
    assert run("missing.py")[0:3:2] == (2, "cg-advise: error: missing.py: no such file\n")


INFER = ROOT / "tests" / "scripts" / "infer_cpu.py"


def test_harness_counts_model_calls_of_an_inference_loop_and_keeps_their_outputs():
    settings = Settings(kind="inference", warmup=2, iterations=6, repeats=3, check_steps=3)
    candidate, snapshot = run_candidate(INFER, ["--calls", "20"], "eager", settings, new_workdir(), 120)
    assert candidate.status == "ok" and candidate.ms_per_iter > 0
    # the same three calls, made here from the same seed
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3)).eval()
    with torch.no_grad():
        expected = [model(torch.randn(1 + i % 5, 8)) for i in range(3)]
    saved = torch.load(snapshot)
    assert [tuple(t.shape) for t in saved] == [(1, 3), (2, 3), (3, 3)]
    assert all(torch.equal(a, b) for a, b in zip(saved, expected))
    short, _ = run_candidate(INFER, ["--calls", "5"], "eager", settings, new_workdir(), 120)
    assert short.failure == {"kind": "incomplete", "message": "the script ended after 5 model calls; timing needs 8", "steps": 5}


def test_tune_of_an_inference_loop_tries_its_own_scopes(tmp_path):
    script = tmp_path / "infer.py"
    shutil.copy(INFER, script)
    code, out, err = run("--scopes", "forward", "--warmup", "2", "--iterations", "6", "--check-steps", "3",
                         "--json", script, env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    saved = json.loads(out)
    assert err.splitlines()[0] == (f"cg-advise: inference step: for loop at {script}:12-13 at module level: "
                                   "model model, without grad")
    assert saved["step"]["kind"] == "inference" and [r["scope"] for r in saved["rows"]] == ["forward"]
    # on the CPU the graphed forward sees no CUDA inputs and runs eagerly: not the scope, and said so
    assert (saved["rows"][0]["status"], saved["rows"][0]["failure"]["kind"]) == ("failed", "ran-eagerly")
    code, _, err = run("--scopes", "fwd_bwd", script, env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert (code, err.splitlines()[-1]) == (2, "cg-advise: error: scope fwd_bwd does not apply to an inference loop "
                                               "(its scopes: forward, compile)")


def test_timing_is_the_median_of_the_windows_and_of_the_processes():
    import statistics

    from tuner.runner import run_repeated

    workdir = new_workdir()
    settings = Settings(warmup=2, iterations=6, repeats=3, check_steps=2, cpus=[0], min_seconds=0.0)
    candidate, _ = run_candidate(SCRIPT, ["--steps", "10"], "eager", settings, workdir, 120)
    data = json.loads((workdir / "eager.json").read_text())
    assert len(data["window_ms"]) == 3 and data["ms_per_iter"] == statistics.median(data["window_ms"])
    assert candidate.ms_per_iter == data["ms_per_iter"]
    repeated, snapshot = run_repeated(SCRIPT, ["--steps", "10"], "eager", settings, new_workdir(), 120, runs=3)
    assert len(repeated.run_ms) == 3 and repeated.ms_per_iter == statistics.median(repeated.run_ms)
    assert snapshot.exists()


def test_a_scope_timed_in_one_pair_runs_in_three_processes_unless_runs_says():
    """A short script's one pair of windows moves from process to process (a host-bound loop's
    pace is the process's): such a scope is timed in ONE_PAIR_RUNS processes by default; --runs,
    where given, decides for every candidate, and everything else runs once."""
    from dataclasses import replace

    from tuner.runner import ONE_PAIR_RUNS
    from tuner.tune import paired_settings, runs_for

    settings = Settings(warmup=10, iterations=100, repeats=5)
    one_pair = paired_settings(settings, script_steps=600, graphed_ms=0.05)
    long_pairs = paired_settings(settings, script_steps=100_000, graphed_ms=0.05)
    assert one_pair.stretch_steps and not long_pairs.stretch_steps
    assert ONE_PAIR_RUNS == 3
    assert [runs_for(None, t) for t in (one_pair, long_pairs, settings, None)] == [3, 1, 1, 1]
    assert [runs_for(2, t) for t in (one_pair, long_pairs, settings, None)] == [2, 2, 2, 2]
    # the stretches alone, outside a paired timing, are no pair
    assert runs_for(None, replace(one_pair, paired=False)) == 1


def test_processes_past_the_required_ones_give_way_to_the_budget(monkeypatch):
    """Processes the tuner adds (past --runs) run only while the budget leaves room for the
    candidates to come (OPTIONAL_RUN_ROOM times the first process) and are dropped where it runs
    out, the measured ones standing; a process --runs asked for that the budget leaves no time
    for makes the candidate over budget, as before."""
    import time

    from tuner import runner
    from tuner.search import Candidate

    seconds = [0.2]   # each process's wall time

    def fake(script, args, scope, settings, workdir, left, **kwargs):
        time.sleep(seconds[0])
        return Candidate(scope, status="ok", ms_per_iter=1.0, paired_speedup=4.0, paired_eager_ms=2.0), None

    monkeypatch.setattr(runner, "run_candidate", fake)
    settings = Settings(warmup=2, iterations=4, paired=True, stretch_steps=2)
    kept, _ = runner.run_repeated(SCRIPT, [], "full_iteration", settings, new_workdir(), 60, runs=3,
                                  deadline=time.monotonic() + 0.1, required=1)
    assert (kept.status, kept.run_ms, kept.paired_speedup, kept.paired_runs) == ("ok", [1.0], 4.0, None)
    over, _ = runner.run_repeated(SCRIPT, [], "full_iteration", settings, new_workdir(), 60, runs=3,
                                  deadline=time.monotonic() + 0.1)
    assert (over.status, over.failure["kind"]) == ("skipped", "budget")
    # room enough: all three; under OPTIONAL_RUN_ROOM first processes left: the first alone
    seconds[0] = 0.01
    three, _ = runner.run_repeated(SCRIPT, [], "full_iteration", settings, new_workdir(), 60, runs=3,
                                   deadline=time.monotonic() + 60, required=1)
    assert three.run_ms == [1.0, 1.0, 1.0] and three.paired_runs == [4.0, 4.0, 4.0]
    seconds[0] = 0.2   # a slower host only makes the first process longer, the room larger
    one, _ = runner.run_repeated(SCRIPT, [], "full_iteration", settings, new_workdir(), 60, runs=3,
                                 deadline=time.monotonic() + runner.OPTIONAL_RUN_ROOM * 0.2 / 2, required=1)
    assert one.run_ms == [1.0] and one.paired_runs is None


def test_timing_goes_on_past_the_minimum_while_the_script_runs():
    """Until min_seconds are timed, windows of the same size go on past --iterations for as
    long as the script runs (its end takes them in), up to MAX_TIMED_FACTOR times --iterations;
    min_seconds 0 times exactly --iterations."""
    from tuner.harness import MAX_TIMED_FACTOR

    def timed(settings, steps):
        workdir = new_workdir()
        candidate, _ = run_candidate(SCRIPT, ["--steps", str(steps)], "eager", settings, workdir, 120)
        assert candidate.status == "ok"
        return json.loads((workdir / "eager.json").read_text())

    to_the_end = timed(Settings(warmup=2, iterations=4, repeats=2, check_steps=2, min_seconds=1e6), 30)
    assert to_the_end["timed_steps"] == 28 and len(to_the_end["window_ms"]) == 14
    assert to_the_end["ms_per_iter"] == statistics.median(to_the_end["window_ms"])
    capped = timed(Settings(warmup=2, iterations=1, repeats=1, check_steps=2, min_seconds=1e6), MAX_TIMED_FACTOR + 40)
    assert capped["timed_steps"] == MAX_TIMED_FACTOR and len(capped["window_ms"]) == MAX_TIMED_FACTOR
    exact = timed(Settings(warmup=2, iterations=4, repeats=2, check_steps=2, min_seconds=0.0), 30)
    assert exact["timed_steps"] == 4 and len(exact["window_ms"]) == 2


AFTER_THE_LOOP = """
import os, time, torch
from torch import nn
model = nn.Linear(8, 1)
x, y = torch.randn(32, 8), torch.randn(32, 1)
for epoch in range({epochs}):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    kept.append(opt) if "kept" in globals() else globals().setdefault("kept", [opt])
    for _ in range({steps}):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        time.sleep({sleep})
open(os.environ["CG_TEST_END"], "w").close()
raise RuntimeError("after the loop")
"""


def test_without_to_end_what_follows_the_timing_is_not_the_candidate_s(tmp_path, monkeypatch):
    """A run not meant to reach the script's end (a baseline run, a reference run) is measured
    once its timing is done: a script whose loop ends while more windows are timed and which
    then fails is still measured (with to_end, the failure after the loop is the candidate's)."""
    script = tmp_path / "ends.py"
    script.write_text(AFTER_THE_LOOP.format(epochs=1, steps=30, sleep=0.0))
    monkeypatch.setenv("CG_TEST_END", str(tmp_path / "end"))
    settings = Settings(warmup=2, iterations=4, repeats=2, check_steps=2, min_seconds=1e6, to_end=False)
    workdir = new_workdir()
    candidate, _ = run_candidate(script, [], "eager", settings, workdir, 120)
    saved = json.loads((workdir / "eager.json").read_text())
    assert candidate.status == "ok" and saved["timed_steps"] == 28 and saved["complete"]
    assert not list(workdir.glob("*.partial"))   # written whole each time
    failed, _ = run_candidate(script, [], "eager", Settings(**{**settings.__dict__, "to_end": True}), new_workdir(), 120)
    assert failed.status == "failed" and failed.failure["kind"] == "after-the-loop"


def test_without_to_end_a_script_whose_steps_stop_being_counted_is_stopped(tmp_path, monkeypatch):
    """Steps are counted by the first optimizer to step; one built again each epoch (the old
    ones kept alive) ends the counting after the first epoch: past min_seconds and a grace the
    harness stops the script with what it timed instead of letting it run on to its end."""
    script = tmp_path / "rebuilt.py"
    script.write_text(AFTER_THE_LOOP.format(epochs=400, steps=20, sleep=0.002))
    end = tmp_path / "end"
    monkeypatch.setenv("CG_TEST_END", str(end))
    settings = Settings(warmup=2, iterations=4, repeats=2, check_steps=2, min_seconds=1.0, to_end=False)
    workdir = new_workdir()
    candidate, _ = run_candidate(script, [], "eager", settings, workdir, 120)
    saved = json.loads((workdir / "eager.json").read_text())
    assert candidate.status == "ok" and saved["steps"] == 20 and saved["timed_steps"] == 18
    assert not end.exists()   # stopped: 400 epochs of 20 steps of 2 ms would have reached it


def test_an_optimizer_built_again_each_epoch_goes_on_being_counted(tmp_path):
    """The first optimizer to step counts the steps; once it is gone (built again each epoch,
    the old one dropped), the next one to step counts: the timing goes on to the script's end."""
    script = tmp_path / "rebuilt.py"
    script.write_text("import torch\nfrom torch import nn\nmodel = nn.Linear(8, 1)\n"
                      "x, y = torch.randn(32, 8), torch.randn(32, 1)\nfor epoch in range(3):\n"
                      "    opt = torch.optim.SGD(model.parameters(), lr=0.01)\n    for _ in range(20):\n"
                      "        opt.zero_grad()\n        nn.functional.mse_loss(model(x), y).backward()\n"
                      "        opt.step()\n")
    settings = Settings(warmup=2, iterations=4, repeats=2, check_steps=2, min_seconds=1e6)
    workdir = new_workdir()
    candidate, _ = run_candidate(script, [], "eager", settings, workdir, 120)
    saved = json.loads((workdir / "eager.json").read_text())
    assert candidate.status == "ok" and saved["steps"] == 60 and saved["timed_steps"] == 58


def test_cpu_list_errors_are_one_line(tmp_path):
    code, out, err = run("--cpus", "a-b", SCRIPT, env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert (code, out, err) == (2, "", "cg-advise: error: --cpus 'a-b': expected a list such as 0-3,8\n")


def test_active_dropout_flags_a_difference_instead_of_failing_it():
    from tuner.runner import check_against_eager
    from tuner.search import Candidate

    plain, plain_snapshot = run_candidate(SCRIPT, ["--steps", "10"], "eager", SMALL, new_workdir(), 120)
    noisy, _ = run_candidate(SCRIPT, ["--steps", "10", "--dropout", "0.5"], "eager", SMALL, new_workdir(), 120)
    assert (plain.stochastic, noisy.stochastic) == (False, True)
    _, other = run_candidate(SCRIPT, ["--steps", "10", "--lr", "0.02"], "eager", SMALL, new_workdir(), 120)
    failed, flagged = (Candidate("fwd_bwd", status="ok", ms_per_iter=1.0) for _ in range(2))
    check_against_eager(failed, plain_snapshot, other, 1e-3, stochastic=False)
    check_against_eager(flagged, plain_snapshot, other, 1e-3, stochastic=True)
    assert (failed.status, failed.correct, failed.failure["kind"]) == ("mismatch", False, "mismatch")
    assert (flagged.status, flagged.correct, flagged.failure["kind"]) == ("ok", None, "unchecked-stochastic")
    assert flagged.usable and not failed.usable


RNN_LOOP = """import sys
import warnings
import torch
from torch import nn

warnings.simplefilter("ignore")          # one layer with dropout: PyTorch warns that it does nothing
torch.manual_seed(0)
layers, dropout = int(sys.argv[1]), float(sys.argv[2])
rnn = (nn.LSTM if sys.argv[3] == "lstm" else nn.GRU)(8, 8, num_layers=layers, dropout=dropout)
head = nn.Linear(8, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.01)
for step in range(10):
    optimizer.zero_grad()
    out, _ = rnn(torch.randn(5, 2, 8))
    head(out).pow(2).mean().backward()
    optimizer.step()
"""


@pytest.mark.parametrize("args, stochastic", [
    (["2", "0.3", "lstm"], True), (["2", "0.3", "gru"], True),
    (["2", "0.0", "lstm"], False), (["1", "0.3", "lstm"], False)])
def test_an_rnn_with_dropout_between_its_layers_is_stochastic(tmp_path, args, stochastic):
    """cuDNN draws an RNN's dropout masks from a state of its own, which the replays' generator
    check cannot see: the module says so before the first step. Dropout applies between
    layers only: one layer, or p = 0, draws nothing."""
    script = tmp_path / "rnn.py"
    script.write_text(RNN_LOOP)
    eager, _ = run_candidate(script, args, "eager", SMALL, new_workdir(), 120)
    assert (eager.status, eager.stochastic) == ("ok", stochastic)


def test_a_difference_within_eagers_own_spread_is_flagged_not_failed():
    """Over the tolerance, eager is asked how far it differs from itself (a second run, only
    then): a scope within EAGER_SPREAD_FACTOR times that is flagged; against an eager that
    repeats itself bit for bit (own difference 0) the same difference fails."""
    from tuner.runner import EAGER_SPREAD_FACTOR, check_against_eager
    from tuner.search import Candidate

    _, plain = run_candidate(SCRIPT, ["--steps", "10"], "eager", SMALL, new_workdir(), 120)
    _, other = run_candidate(SCRIPT, ["--steps", "10", "--lr", "0.02"], "eager", SMALL, new_workdir(), 120)
    difference = max_relative_difference(plain, other)
    asked = []

    def own(value):
        return lambda: asked.append(value) or value

    same, spread, steady, beyond = (Candidate("full_iteration", status="ok", ms_per_iter=1.0) for _ in range(4))
    check_against_eager(same, plain, plain, 1e-3, eager_own=own(1.0))
    assert same.correct is True and asked == []                  # within the tolerance: eager is not run again
    check_against_eager(spread, plain, other, 1e-3, eager_own=own(difference / 2))
    assert (spread.status, spread.correct, spread.failure["kind"]) == ("ok", None, "unchecked-nondeterministic")
    check_against_eager(steady, plain, other, 1e-3, eager_own=own(0.0))
    check_against_eager(beyond, plain, other, 1e-3, eager_own=own(difference / (EAGER_SPREAD_FACTOR + 1)))
    assert (steady.status, beyond.status) == ("mismatch", "mismatch") and spread.usable and not beyond.usable


def test_build_capturable_turns_capturable_on_where_an_optimizer_takes_it():
    """The reference a full-iteration graph of the optimizer step is compared with: every
    torch.optim class that takes ``capturable`` builds with it on unless the script says
    otherwise; the others are left alone. (Its own process: it rebinds torch.optim.)"""
    code = ("import torch\nfrom tuner.harness import build_capturable\nbuild_capturable(torch)\n"
            "params = torch.nn.Linear(2, 2).parameters\n"
            "print(torch.optim.Adam(params()).defaults['capturable'], torch.optim.NAdam(params(), lr=0.1).defaults"
            "['capturable'], torch.optim.Adam(params(), capturable=False).defaults['capturable'], "
            "'capturable' in torch.optim.SGD(params(), lr=0.1).defaults)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.split() == ["True", "True", "False", "False"]


NOISE_IN_FORWARD = """import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(16, 16).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
noisy = sys.argv[1] == "noisy"
for step in range(int(sys.argv[2])):
    x = torch.randn(8, 16, device="cuda")          # a batch drawn on the GPU: not the step's own noise
    optimizer.zero_grad()
    out = model(x)
    if noisy:
        out = out + torch.randn_like(out)            # a VAE's reparameterisation: no dropout module
    out.pow(2).mean().backward()
    optimizer.step()
"""


@requires_cuda
def test_a_graph_that_draws_random_numbers_is_flagged_stochastic(tmp_path):
    """Not dropout modules only: a graph whose replay moves the CUDA generator (here
    ``torch.randn_like`` in the loss, inside the full-iteration graph) draws other numbers than
    eager; a batch drawn on the GPU outside the graph does not make it so, nor does eager's own
    draw (no graph, no dropout module: nothing to tell it by before the check)."""
    script = tmp_path / "noise.py"
    script.write_text(NOISE_IN_FORWARD)
    plain, _ = run_candidate(script, ["plain", "10"], "full_iteration", SMALL, new_workdir(), 120)
    noisy, _ = run_candidate(script, ["noisy", "10"], "full_iteration", SMALL, new_workdir(), 120)
    eager, _ = run_candidate(script, ["noisy", "10"], "eager", SMALL, new_workdir(), 120)
    assert (plain.status, noisy.status) == ("ok", "ok")
    assert (plain.stochastic, noisy.stochastic, eager.stochastic) == (False, True, False)


def test_a_short_script_is_timed_over_the_steps_it_has(tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(SCRIPT, script)
    code, out, err = run("--scopes", "fwd_bwd", "--json", script, "--steps", "40", env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert code == 0, err
    assert "cg-advise: the script runs 40 steps: timing 34 after 4 warm-up steps instead of 100 after 10" in err
    assert json.loads(out)["timing"] == {"warmup": 4, "iterations": 34, "repeats": 5, "min_seconds": 3.0}
    # too few steps for long paired windows: the graph scopes are timed in one pair (paired_settings)
    assert ("cg-advise: the script runs 40 steps, too few for long paired windows: fwd_bwd timed in one pair of "
            "17-step windows, graphed then eager, each in 3 processes (their median: one pair moves from process "
            "to process)") in err
    code, out, err = run("--json", script, "--steps", "12", env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (f"cg-advise: error: {script} does not complete 110 training steps under the "
                                    "harness: the script ended after 12 training steps; timing needs 110; run it "
                                    "longer (its own arguments pass through: cg-advise tune train.py --steps N)")


def test_tune_with_several_runs_reports_how_far_they_spread(tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(SCRIPT, script)
    code, out, err = run("--scopes", "fwd_bwd", "--runs", "2", "--warmup", "2", "--iterations", "4",
                         "--check-steps", "2", script, "--steps", "10", env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert code == 0, err   # fwd_bwd ran its eager fallback on the CPU: failed, not a winner
    saved = json.loads(tune_result_path(script).read_text())
    spread = max(saved["eager_run_ms"]) / min(saved["eager_run_ms"])
    line = next(line for line in out.splitlines() if line.startswith("between runs"))
    assert line == (f"between runs (slowest/fastest of 2 processes): eager {spread:.2f}x; "
                    "timings closer than that are within this machine's noise")


def test_a_candidate_that_fails_after_the_loop_is_that_candidates_failure(tmp_path):
    """The harness lets the script run on after timing, so a rewrite that breaks the code after
    the loop (a name the step no longer binds) fails in tune, named, not at the end of a real run."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.read_text() + "print(f'final loss {loss.item():.4f}')\n")
    broken = tmp_path / "broken.py"   # what a careless rewrite would leave: `loss` unbound after the loop
    broken.write_text(SCRIPT.read_text().replace("    loss = nn.functional.mse_loss(model(x), y)\n    loss.backward()",
                                                 "    _l = nn.functional.mse_loss(model(x), y)\n    _l.backward()")
                      + "print(f'final loss {loss.item():.4f}')\n")
    ok, _ = run_candidate(script, ["--steps", "10"], "eager", SMALL, new_workdir(), 120)
    assert ok.status == "ok"
    failed, _ = run_candidate(script, ["--steps", "10"], "full_iteration", SMALL, new_workdir(), 120, target=broken)
    assert failed.status == "failed" and failed.failure["kind"] == "after-the-loop"
    assert failed.failure["message"] == (f"the patched script failed after the loop: NameError: name 'loss' is not "
                                         f"defined at {script}:{len(broken.read_text().splitlines())} of the full_iteration rewrite")


def test_a_full_iteration_of_a_hand_update_loop_with_varying_backward_calls_is_skipped_with_why(tmp_path):
    """No optimizer: tune counts a loop's steps by its backward() calls, so many an iteration as
    discovery counts. One under a condition makes that count vary; a full-iteration graph's
    replays could not be set against eager's steps, so that scope is skipped, with why, and the
    others run."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\ntorch.manual_seed(0)\nmodel = nn.Linear(4, 1)\n"
        "data = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(4)]\n"
        "for step in range(12):\n    x, y = data[step % 4]\n    model.zero_grad()\n"
        "    loss = nn.functional.mse_loss(model(x), y)\n    loss.backward()\n"
        "    if step % 3 == 0:\n        model(x).abs().mean().backward()\n"
        "    with torch.no_grad():\n        for p in model.parameters():\n            p.add_(p.grad, alpha=-0.1)\n")
    code, out, err = run("--scopes", "full_iteration,fwd_bwd", "--warmup", "2", "--iterations", "4",
                         "--check-steps", "2", "--json", script, env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert code == 0, err
    rows = {r["scope"]: r for r in json.loads(out)["rows"]}
    assert rows["full_iteration"]["status"] == "skipped"
    assert rows["full_iteration"]["failure"]["kind"] == "uncounted-steps"
    assert "full_iteration: skipped (the loop has no optimizer and its iterations make a varying number" in err
    assert rows["fwd_bwd"]["status"] == "failed"   # run, on a CPU its eager fallback: no graph replayed
