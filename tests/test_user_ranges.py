"""Exports of a loop annotated with NVTX the way users annotate their own, under a plain `nsys
profile` (no cg-advise bootstrap: bench/workloads/user_nvtx.py, bench/gpu_user_nvtx.sh, H100):
which repeated ranges the analyser takes as iterations, and, where none is one training step
each (or there is no range), the training step its kernels repeat. A range an epoch repeats
launches most of the GPU work too; taken as the iterations, it made a prediction per epoch.
The counts the tests hold the analyser to are read from the exports with plain SQL."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from advisor.cli import cli
from advisor.iterations import masked_labels, outermost, process_rows
from advisor.metrics import match_launches
from advisor.steps import KernelSequence
from advisor.trace import open_trace
from conftest import rewrite, sample, sql


def analyse(name: str) -> dict:
    result = CliRunner().invoke(cli, ["analyze", str(sample(name)), "--json"])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def nvtx_count(name: str, like: str) -> int:
    return sql(sample(name), f"SELECT COUNT(*) FROM NVTX_EVENTS WHERE text LIKE '{like}'")[0][0]


def steps_run(name: str) -> int:
    """Training steps the run took: one cross-entropy loss kernel a step in this workload."""
    return sql(sample(name), "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName "
                     "WHERE s.value LIKE 'nll_loss_forward%'")[0][0]


def step_period_ms(path) -> float:
    """The median time from one step's loss kernel to the next one's on the GPU: the step's
    period, read with SQL alone."""
    starts = [row[0] for row in sql(path, "SELECT k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                          "ON s.id = k.shortName WHERE s.value LIKE 'nll_loss_forward%' ORDER BY k.start")]
    return float(np.median(np.diff(starts))) / 1e6


def assert_kernel_steps(analysis: dict, path, steps: int) -> None:
    """Iterations found from the repeated step of the kernels: all of the run's steps but the
    first (its kernels include one-time set-up), the last (no next step bounds it) and, each
    step begun after its optimizer's last kernel, the one cut there; at the period SQL reads
    off the loss kernels, and predicted."""
    s = analysis["summary"]
    assert s["iteration_source"].startswith("a training step its kernels repeat (")
    assert steps - 3 <= s["iterations"] <= steps - 1
    assert s["gpu_period_ms"] == pytest.approx(step_period_ms(path), rel=0.05)
    assert "speedup" in analysis["predictions"]["full_iteration"]


def shape_of(name: str, label: str):
    """What the step check says of the ranges of one masked name (advisor/steps.py)."""
    trace = open_trace(sample(name))
    pid = int(np.unique(trace.ops["pid"])[0])
    ops = trace.ops[trace.ops["pid"] == pid]
    rows = process_rows(trace, pid)
    chosen = outermost(rows[masked_labels(trace)[rows["name"]] == label])
    assert len(chosen) > 1
    launches = match_launches(trace, ops)
    return KernelSequence(ops, launches, trace.optimizer_names).not_a_step(chosen)


def test_one_range_a_step_is_taken_as_the_iterations_and_predicted():
    analysis = analyse("user_nvtx_step")
    s = analysis["summary"]
    assert s["iteration_source"] == "repeated top-level range 'train_step #'"
    assert s["iterations"] == nvtx_count("user_nvtx_step", "train_step %") == steps_run("user_nvtx_step") == 24
    assert "speedup" in analysis["predictions"]["full_iteration"]


def test_an_epochs_range_is_not_an_iteration_the_step_its_kernels_repeat_is():
    """Two 'epoch N' ranges of 12 steps each launch 61 % of the GPU work (the backward runs on
    autograd's thread, outside the push/pop range): they repeat, but each holds twelve steps."""
    assert nvtx_count("user_nvtx_epoch", "epoch %") == 2 and steps_run("user_nvtx_epoch") == 24
    analysis = analyse("user_nvtx_epoch")
    assert analysis["summary"]["iteration_candidates"][0] == {
        "range": "epoch #", "gpu_share": pytest.approx(0.61, abs=0.02),
        "not_iterations": "each range holds several training steps"}
    assert_kernel_steps(analysis, sample("user_nvtx_epoch"), 24)


def test_a_steps_range_inside_an_epochs_is_taken_instead():
    analysis = analyse("user_nvtx_epoch_step")
    s = analysis["summary"]
    assert s["iteration_source"] == "repeated nested range 'train_step #'"
    assert s["iterations"] == nvtx_count("user_nvtx_epoch_step", "train_step %") == 24
    assert [c["range"] for c in s["iteration_candidates"]] == ["epoch #", "train_step #"]
    assert "speedup" in analysis["predictions"]["full_iteration"]


def test_without_an_optimizer_an_epochs_steps_are_told_apart_by_autograds_thread():
    """A hand-written update launches no multi-tensor kernel: the repeated step is the one that
    launches from two threads (the forward from Python's, the backward from autograd's)."""
    assert sql(sample("user_nvtx_epoch_hand"), "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s "
                                       "ON s.id = k.shortName WHERE s.value LIKE '%multi_tensor%'")[0][0] == 0
    assert shape_of("user_nvtx_epoch_hand", "epoch #") == "each range holds several training steps"
    assert_kernel_steps(analyse("user_nvtx_epoch_hand"), sample("user_nvtx_epoch_hand"), 24)


def test_an_operators_ranges_are_pieces_of_a_step():
    """emit_nvtx's ranges, one an operator call: most spans from one to the next hold no
    optimizer kernel (these launch 23 % of the GPU work anyway, so the run is one window)."""
    assert shape_of("user_nvtx_ops", "aten::t, op_id = #").endswith("pieces of a step")
    assert_kernel_steps(analyse("user_nvtx_ops"), sample("user_nvtx_ops"), 24)


@pytest.mark.parametrize("label", ["forward", "backward", "optimizer"])
def test_a_phase_that_runs_once_a_step_is_one_step_a_range(label):
    """Each phase range runs once a step, so the spans from one to the next are whole steps;
    the optimizer's range repeats its own multi-tensor kernel seven times (Adam's foreach), which
    is no training step repeated. None launches half the GPU work from its own thread here."""
    assert nvtx_count("user_nvtx_phases", label) == steps_run("user_nvtx_phases")
    assert shape_of("user_nvtx_phases", label) is None
    assert_kernel_steps(analyse("user_nvtx_phases"), sample("user_nvtx_phases"), 24)


@pytest.mark.parametrize("name", ["corpus_micro_steps_profiled", "zoo_cnn_amp_profiled", "zoo_hf_bert_profiled",
                                  "launch_graphed", "infer_eager"])
def test_cg_advise_own_iterations_pass_the_step_check(name):
    """The bootstrap's iteration (and inference call) ranges are one step each: gradient
    accumulation's four identical micro-steps hold no optimizer kernel, a graphed run launches
    its steps as graphs, an inference loop has one thread and no optimizer."""
    label = "cg-advise:forward" if name == "infer_eager" else "cg-advise:iteration"
    assert shape_of(name, label) is None


def test_a_plain_export_without_ranges_is_cut_at_the_step_its_kernels_repeat():
    assert sql(sample("user_nvtx_none"), "SELECT COUNT(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'")[0][0] == 0
    assert_kernel_steps(analyse("user_nvtx_none"), sample("user_nvtx_none"), 24)


def test_without_its_ranges_a_profiled_run_is_cut_where_they_were(copy_sample):
    """cg-advise's own profile with every NVTX range deleted: the steps its kernels repeat give
    the GPU work and the kernels of an iteration that its iteration ranges gave."""
    ranged = analyse("launch_eager")["summary"]
    path = copy_sample("launch_eager")
    rewrite(path, "DELETE FROM NVTX_EVENTS;")
    result = CliRunner().invoke(cli, ["analyze", str(path), "--json"])
    s = json.loads(result.stdout)["summary"]
    assert s["iteration_source"].startswith("a training step its kernels repeat (")
    assert s["iterations"] >= ranged["iterations"] - 3
    assert s["kernels_per_iteration"] == ranged["kernels_per_iteration"]
    assert s["gpu_busy_ms_per_iteration"] == pytest.approx(ranged["gpu_busy_ms_per_iteration"], rel=0.05)


def test_an_inference_loop_without_ranges_stays_one_window(copy_sample):
    """No optimizer kernel and one launching thread: a repeated forward is no training step, so
    the run is one window and gets no prediction (a layer repeated would look the same)."""
    path = copy_sample("infer_eager")
    rewrite(path, "DELETE FROM NVTX_EVENTS;")
    result = CliRunner().invoke(cli, ["analyze", str(path), "--json"])
    analysis = json.loads(result.stdout)
    assert analysis["summary"]["iteration_source"] == (
        "whole run (no iteration ranges found, nor a training step its kernels repeat)")
    assert analysis["predictions"]["note"].startswith("predictions withheld")


def _grouped(rows: np.ndarray, size: int) -> np.ndarray:
    """Ranges of ``size`` consecutive ranges each (an epoch made of the run's own step ranges)."""
    out = rows[::size][: len(rows) // size].copy()
    out["end"] = rows["end"][size - 1::size][: len(out)]
    return out


@pytest.mark.parametrize("name, label, size", [
    ("user_nvtx_step", "train_step #", 3),               # an epoch of three steps
    ("launch_graphed", "cg-advise:iteration", 5),        # a graphed run: a graph launch a step, no kernel
])
def test_ranges_of_several_of_a_runs_own_steps_hold_several_steps(name, label, size):
    """The run's own step ranges, taken `size` at a time: each holds several steps."""
    trace = open_trace(sample(name))
    pid = int(np.unique(trace.ops["pid"])[0])
    ops = trace.ops[trace.ops["pid"] == pid]
    rows = process_rows(trace, pid)
    steps = outermost(rows[masked_labels(trace)[rows["name"]] == label])
    launches = match_launches(trace, ops)
    kernels = KernelSequence(ops, launches, trace.optimizer_names)
    assert kernels.not_a_step(steps) is None
    assert kernels.not_a_step(_grouped(steps, size)) == "each range holds several training steps"


def test_an_optimizer_stepped_from_gradient_hooks_is_no_step_repeated():
    """A step whose backward steps each layer's optimizer as its gradients arrive (optimizer in
    the backward): the layer pieces repeat with optimizer kernels in them, but launch from
    autograd's thread alone; the whole step, forward on Python's thread, is the step."""
    from advisor.steps import repeated_step

    forward = [(name, 1) for name in range(1, 9)]
    backward = [(kernel, 2) for _ in range(8) for kernel in (20, 21, 99)]   # 99: the optimizer's kernel
    step = forward + backward
    names = np.array([k for k, _ in step] * 6)
    tids = np.array([t for _, t in step] * 6)
    found = repeated_step(names, tids, names == 99, 2)
    assert found is not None and found.kernels == len(step)
    one_step = slice(0, len(step))
    assert repeated_step(names[one_step], tids[one_step], names[one_step] == 99, 2) is None


KERNELS_FROM_ONE_ITERATION_TO_THE_NEXT = """
    WITH it AS (SELECT n.start AS a, LEAD(n.start) OVER (ORDER BY n.start) AS b FROM NVTX_EVENTS n
                JOIN StringIds s ON s.id = n.textId WHERE s.value = 'cg-advise:iteration')
    SELECT (SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN CUPTI_ACTIVITY_KIND_KERNEL k
            ON k.correlationId = r.correlationId WHERE r.start >= it.a AND r.start < it.b)
    FROM it WHERE it.b IS NOT NULL"""


@pytest.mark.parametrize("name", ["launch_eager", "compute_eager", "mixed_eager", "sync_eager", "zoo_mlp_profiled",
                                  "zoo_cnn_amp_profiled", "zoo_hf_bert_profiled", "corpus_micro_steps_profiled"])
def test_the_step_its_kernels_repeat_is_the_profiles_own_iteration(name):
    """In cg-advise's own profiles (an MLP, a GPU-bound one, AMP with a scheduler, a Hugging Face
    BERT, four micro-steps an optimizer step): the step the kernels repeat, ranges aside, is
    the iteration the bootstrap marked: as many kernels as SQL counts from one iteration range
    to the next in all of them alike, and that many times."""
    from collections import Counter

    (kernels, times), = Counter(row[0] for row in sql(sample(name), KERNELS_FROM_ONE_ITERATION_TO_THE_NEXT)).most_common(1)
    trace = open_trace(sample(name))
    ops = trace.ops
    launches = match_launches(trace, ops)
    found = KernelSequence(ops, launches, trace.optimizer_names).repeated_steps()
    assert found is not None
    assert found.source in [f"a training step its kernels repeat ({kernels} kernels, {n} times alike)"
                            for n in (times - 1, times)]   # begun after the optimizer: the last cut there


def test_an_epochs_period_matches_better_than_its_steps_and_the_step_is_still_the_iteration():
    """Four epochs of ten steps and an evaluation each: the epoch's period matches the sequence
    everywhere, the step's all but the evaluations'; the shorter one that matches nearly as
    well, and is a step, is the iteration."""
    from advisor.steps import repeated_step

    step = [(name, 1) for name in range(1, 8)] + [(name, 2) for name in range(10, 18)] + [(99, 1)] * 3
    evaluation = [(name, 1) for name in range(1, 8)] * 6 + [(50, 1)]
    epoch = step * 10 + evaluation
    names, tids = np.array([k for k, _ in epoch] * 4), np.array([t for _, t in epoch] * 4)
    found = repeated_step(names, tids, names == 99, 5)
    assert found is not None and found.kernels == len(step) and len(found.starts) >= 4 * 9
