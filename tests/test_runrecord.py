"""The run record: scopes as patch applies them (static), calibration without a GPU, reading."""

import json
import sys

import pytest

from advisor import runrecord
from advisor.errors import CgAdviseError
from conftest import ROOT, requires_cuda

ZOO_SCRIPTS = ROOT / "bench" / "workloads" / "zoo_scripts"


def test_applied_scopes_follow_what_patch_does():
    """A GradScaler keeps full_iteration's optimizer step eager; a plain loop captures it."""
    amp = runrecord.applied_scopes(ZOO_SCRIPTS / "zoo_amp.py")
    plain = runrecord.applied_scopes(ZOO_SCRIPTS / "zoo_plain.py")
    assert amp["kind"] == plain["kind"] == "train"
    assert amp["scopes"]["full_iteration"] == {"applies": True, "optimizer_eager": True, "zero_grad_in_graph": True,
                                               "per_micro_step": False, "prepared_share": 0.0, "models": [],
                                               "helper_inputs": 2}
    assert plain["scopes"]["full_iteration"] == {"applies": True, "optimizer_eager": False, "zero_grad_in_graph": True,
                                                 "per_micro_step": False, "prepared_share": 0.0, "models": [],
                                                 "helper_inputs": 2}
    assert plain["scopes"]["fwd_bwd"]["models"] == ["model"]
    assert set(plain["scopes"]) == {"full_iteration", "fwd_bwd", "submodule", "compile"}


def test_the_record_counts_what_the_full_iteration_helper_is_handed():
    """The names the rewritten loop hands the helper at each replay, as the patch writes the
    call: none for a loop that trains on one fixed tensor, the batch's names, and the state a
    step carries to the next (an RNN's hidden state); other scopes call no such helper."""
    counted = {}
    for name in ("main_guard", "counter_in_step", "basic_for", "rnn_hidden_state"):
        scopes = runrecord.applied_scopes(ROOT / "tests" / "corpus" / f"{name}.py")["scopes"]
        counted[name] = scopes["full_iteration"]["helper_inputs"]
        assert all("helper_inputs" not in scopes[scope] for scope in ("fwd_bwd", "submodule", "compile"))
    assert counted == {"main_guard": 0, "counter_in_step": 1, "basic_for": 2, "rnn_hidden_state": 3}


def test_a_graph_of_one_micro_step_leaves_the_loops_zero_grad_eager():
    """Gradient accumulation in micro-steps: the graph is one micro-step, its backward adding
    into gradients that the loop still zeroes once per optimizer step, outside the graph (a
    plain loop's zero_grad goes into the graph: the prediction no longer counts it)."""
    applied = runrecord.applied_scopes(ROOT / "tests" / "corpus" / "micro_steps.py")
    assert applied["scopes"]["full_iteration"]["applies"]
    assert applied["scopes"]["full_iteration"]["zero_grad_in_graph"] is False
    assert applied["scopes"]["full_iteration"]["per_micro_step"] is True


def test_a_graph_that_begins_with_the_batch_s_preparation_says_so():
    """FixMatch's augmentation (``torch.cat((weak_aug(x), ...))``) comes right after the batch's
    ``.to(device)`` and before the model call, and all of it goes into the full-iteration graph;
    the GPU-augmenting loader loop scales its images and draws a flip mask before the step
    begins, then flips, jitters and normalises inside it: three of five; a loop that indexes its
    batch before the step (tabular BCE) and one whose step begins at the model call keep none."""
    names = ("fixmatch_unlabeled", "gpu_augment_loader", "tabular_bce", "cifar_tutorial", "micro_steps")
    share = {name: runrecord.applied_scopes(ROOT / "tests" / "corpus" / f"{name}.py")["scopes"]["full_iteration"][
        "prepared_share"] for name in names}
    # a graph of one micro-step: the trace's stretch before the first holds the outer body's work too
    assert share == {"fixmatch_unlabeled": 1.0, "gpu_augment_loader": 0.6, "tabular_bce": 0.0, "cifar_tutorial": 0.0,
                     "micro_steps": 0.0}


LOOP = """import torch
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(8, 4) for _ in range(3)]
def to_device(x):
    return x.to("cpu")
def compute_loss(model, x):
    return model(x).pow(2).mean()
for x in data:
{body}
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("body, expected", [
    # the copy inside a helper: every statement that works before the step counts as left out (patch
    # keeps the first two out, captures the third)
    ("    x = to_device(x)\n    x = x * 2\n    x = torch.relu(x) + 1\n    loss = model(x).pow(2).mean()", 1 / 3),
    # the forward inside a helper given the model: the statements before it, not those after
    ("    x = x.to('cpu')\n    x = torch.relu(x) + 1\n    loss = compute_loss(model, x)\n"
     "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", 1.0),
])
def test_the_share_of_the_batch_s_preparation_the_graph_takes_in(tmp_path, body, expected):
    script = tmp_path / "loop.py"
    script.write_text(LOOP.format(body=body))
    full = runrecord.applied_scopes(script)["scopes"]["full_iteration"]
    assert full["applies"] and full["prepared_share"] == pytest.approx(expected)


def test_a_refused_scope_carries_patch_s_reason():
    # the encoder is called twice before backward: the per-model scopes refuse it
    applied = runrecord.applied_scopes(ROOT / "tests" / "corpus" / "shared_encoder_twice.py")
    refused = {s: v["why"] for s, v in applied["scopes"].items() if not v["applies"]}
    assert refused and all("cannot apply" in why for why in refused.values())


def test_a_script_without_a_loop_is_an_error_entry_not_a_crash(tmp_path):
    script = tmp_path / "noloop.py"
    script.write_text("print('hello')\n")
    assert "error" in runrecord.applied_scopes(script)


def test_calibration_without_a_gpu_says_why():
    got = runrecord.calibration(sys.executable)
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if has_cuda:
        pytest.skip("a GPU is present: see test_calibration_on_a_gpu")
    assert got == {"error": "no CUDA device"}


@requires_cuda
def test_calibration_on_a_gpu():
    got = runrecord.calibration(sys.executable)
    assert got["schema"] == "cg-advise.calibration/1" and got["gpu"]
    assert 0 < got["graph_node_us"] < got["eager_launch_us"] < 1000
    # the kept host costs are the median round's, every round recorded
    rounds = got["eager_launch_us_rounds"]
    assert len(rounds) == 5 and got["eager_launch_us"] == pytest.approx(sorted(rounds)[2], rel=1e-3)
    assert got["graph_launch_us"] == pytest.approx(sorted(got["graph_launch_us_rounds"])[2], rel=1e-3)
    # the full-iteration helper's own cost per call: Python and two copies, more than nothing
    assert 0 < got["helper_overhead_us"] < 1000 and len(got["helper_overhead_us_rounds"]) == 5
    # a replay among replays, beside the one timed right after a sync
    assert 0 < got["graph_replay_batched_us"] < 1000 and len(got["graph_replay_batched_us_rounds"]) == 5
    # a graphed callable's training step and the same step eagerly, of 4 and of 16 parameter
    # tensors: host time, some, never 2 ms for 4 (0.29-1.0 ms on the lent H200s), never 10 ms for
    # 16 (the eager step of 16 read 1.5-2.3 ms there)
    for key, bound in (("callable_step_us", 2000), ("callable_eager_step_us", 2000),
                       ("callable_step_16_params_us", 10_000), ("callable_eager_step_16_params_us", 10_000)):
        assert key in got, got.get("callable_step_error")
        assert 0 < got[key] < bound and len(got[f"{key}_rounds"]) == 5
    # a plain loop's host time between its steps under the profile's hooks: some, never a millisecond
    assert 0 < got["step_edges_us"] < 1000 and len(got["step_edges_us_rounds"]) == 5


def test_the_step_edges_are_timed_under_the_profiles_own_hooks():
    """``step_edges`` runs a plain loop under advisor.inject's hooks (on the CPU here) and
    reads, per timed iteration, the between-iteration time less zero_grad's: the rounds hold
    the timed stretches (the warm-up's second half and as many after the window), each figure
    positive and below the whole iteration's host time; the hooks are gone after."""
    import time

    import torch
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim

    from advisor import calibrate

    def installed():
        return (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks),
                len(optim._global_optimizer_pre_hooks), len(optim._global_optimizer_post_hooks),
                optim.Optimizer.zero_grad, nn_module.Module.zero_grad, optim.Optimizer.__init__,
                torch.autograd.backward, torch.cuda.CUDAGraph.replay)

    before = installed()
    began = time.perf_counter()
    rounds = calibrate.step_edges(torch, torch.device("cpu"))
    elapsed_us = (time.perf_counter() - began - (calibrate.ROUNDS - 1) * calibrate.PAUSE_S) * 1e6
    timed = [us for r in rounds for us in r]
    assert len(rounds) == calibrate.ROUNDS
    assert all(len(r) == calibrate.EDGE_WARMUP for r in rounds)
    # each between-iteration stretch is some of its iteration: positive, and all of them
    # together less than the loop's whole time
    assert all(us > 0 for us in timed) and sum(timed) < elapsed_us
    assert installed() == before   # every hook and wrapper taken back


def test_a_disturbed_round_does_not_move_the_calibration():
    """One or two busy rounds (the 44.6 us of a busy moment against 7-11 us in the others)
    leave the median round; within a round the median ignores an interrupted batch."""
    from advisor.calibrate import typical

    quiet = [9.1, 9.3, 9.0, 9.4, 9.2, 9.6, 9.2]
    busy = [44.0, 45.1, 44.6, 43.9, 47.0, 44.2, 44.8]
    slow_mode = [x + 1.5 for x in quiet]
    assert typical([busy, quiet, slow_mode, busy, quiet]) == pytest.approx(10.7)
    assert typical([quiet, busy, quiet]) == pytest.approx(9.2)
    assert typical([quiet[:-1] + [300.0]]) == pytest.approx(9.3)


def test_read_refuses_damaged_and_foreign_records(tmp_path):
    assert runrecord.read(tmp_path / "none.json") is None
    damaged = tmp_path / "d.json"
    damaged.write_text("{")
    with pytest.raises(CgAdviseError, match="damaged JSON"):
        runrecord.read(damaged)
    foreign = tmp_path / "f.json"
    foreign.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(CgAdviseError, match="not a cg-advise.run/1 run record"):
        runrecord.read(foreign)


def test_committed_records_hold_a_measured_baseline():
    record = runrecord.read(ROOT / "sample_traces" / "zoo_mlp_profiled.cg-advise-run.json")
    assert record["window"] == {"warmup": 20, "iterations": 20}
    assert runrecord.measured_eager_ms(record) == record["untraced"]["gpu_ms_per_iteration"] > 0


def test_a_loop_no_capture_can_hold_is_recorded_as_such():
    """An L-BFGS closure: discovery finds the loop and refuses it, and the record says no scope
    applies (the predictions then name the reason); a script whose loop discovery cannot find
    records the error alone (the predictions stay: a capture written by hand may apply)."""
    lbfgs = runrecord.applied_scopes(ROOT / "tests" / "corpus" / "lbfgs_closure.py")
    assert lbfgs["uncapturable"] is True and "trains through a closure" in lbfgs["error"]
    unknown = runrecord.applied_scopes(ROOT / "bench" / "workloads" / "user_profiler_loop.py")
    assert "no training loop" in unknown["error"] and "uncapturable" not in unknown
