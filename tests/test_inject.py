"""The NVTX bootstrap runs real CPU scripts; ranges are recorded through a test sink."""

import json
import os
import subprocess
import sys

import pytest

from advisor import ranges
from advisor.inject import Injector, Window, run_target
from conftest import ROOT

SCRIPT = str(ROOT / "tests" / "scripts" / "train_cpu.py")
CHILDREN = ("encoder", "middle", "decoder")


class RecordingSink:
    """Keeps every range event, checking that pushes and pops nest."""

    def __init__(self):
        self.events = []
        self.depth = 0
        self.open_ranges = set()

    def push(self, name):
        self.events.append(("push", name))
        self.depth += 1
        return self.depth   # as torch.cuda.nvtx.range_push does: a hook must not pass it on

    def pop(self):
        assert self.depth > 0, "pop without push"
        self.events.append(("pop",))
        self.depth -= 1

    def start(self, name):
        handle = len(self.events)
        self.events.append(("start", name))
        self.open_ranges.add(handle)
        return handle

    def end(self, handle):
        self.open_ranges.remove(handle)
        self.events.append(("end", handle))

    def count(self, kind, name=None):
        return sum(1 for e in self.events if e[0] == kind and (name is None or e[1] == name))


class StopScript(Exception):
    pass


def run_file(path, *args, window=None, injector=None):
    """Runs ``path args`` under an installed injector (a new one over a RecordingSink unless
    given, so that a caller keeps it when the run raises); returns (sink, injector)."""
    injector = (injector or Injector(RecordingSink(), window or Window())).install()
    saved = sys.argv[:]
    try:
        run_target([str(path), *args])
    finally:
        injector.finish()   # as the bootstrap's main() does at the script's end
        injector.remove()
        sys.argv = saved
    return injector.sink, injector


def run_script(*args, window=None):
    return run_file(SCRIPT, *args, window=window)


def test_training_iterations_and_submodules(capsys):
    sink, injector = run_script("--steps", "6")
    assert sink.count("start", ranges.ITERATION) == 6 and sink.count("start", ranges.BACKWARD) == 6
    assert sink.count("end") == 12
    assert sink.count("push", ranges.FORWARD) == 6 and sink.count("push", ranges.OPTIMIZER) == 6
    for child in CHILDREN:
        assert sink.count("push", ranges.MODULE + child) == 6
    assert sink.depth == 0 and not sink.open_ranges
    # without a window nothing is timed: the baseline comes from a profile's untraced warm-up
    assert injector.summary() == {"iterations": 6, "training_steps": 6, "inference_calls": 0,
                                  "module_ranges": 18, "graph_replays": 0, "steps_ended_at_next_forward": 0,
                                  "trained_parameters": 6,
                                  "optimizers": [{"class": "SGD", "parameters": 6, "made_capturable": 0,
                                                  "made_capturable_elements": 0, "torch_class": True,
                                                  "made_capturable_groups": 0, "made_capturable_dtypes": [],
                                                  "made_capturable_foreach_off": False}],
                                  "optimizers_stepped": 1, "made_capturable": {"tensors": 0, "elements": 0},
                                  "models": [["model"]],
                                  # counted from the third call on (the second one adopts the model)
                                  "input_layouts": {"0": {"calls": 4, "first_share": 1.0, "distinct": 1}},
                                  "untraced": {}}
    # the script saw its own argv
    assert capsys.readouterr().out.splitlines() == ["argv ['--steps', '6']", "done"]


def test_trained_parameters_leave_frozen_ones_out():
    """Three Linear layers: a weight and a bias each, 6 tensors; the frozen encoder's 2 do not train."""
    _, injector = run_script("--steps", "2", "--freeze-encoder")
    assert injector.summary()["trained_parameters"] == 4


def test_optimizers_are_described_once_with_what_a_graph_makes_capturable():
    """AdamW's step counts live on the host unless it is built capturable: a full-iteration graph
    turns that on, and its step then launches kernels the eager trace never shows (SGD has no
    such flag). Each optimizer is described once, at its first step."""
    _, injector = run_script("--steps", "3", "--adamw", "--freeze-encoder")
    # the middle Linear(16, 16) and the decoder Linear(16, 2): 16*16 + 16 + 16*2 + 2 elements
    assert injector.summary()["optimizers"] == [{"class": "AdamW", "parameters": 4, "made_capturable": 4,
                                                 "made_capturable_elements": 306, "torch_class": True,
                                                 "made_capturable_groups": 1,
                                                 "made_capturable_dtypes": ["torch.float32"],
                                                 "made_capturable_foreach_off": False}]
    assert injector.summary()["made_capturable"] == {"tensors": 4, "elements": 306}
    _, injector = run_script("--steps", "2", "--inference")
    assert injector.summary()["optimizers"] == [] and injector.summary()["made_capturable"]["tensors"] == 0


def test_optimizers_built_again_count_their_parameters_once_and_an_odd_one_does_not_break_the_step():
    """An optimizer built anew every epoch over the same parameters is the same capturable
    work for a graph: its tensors count once; descriptions stop at MAX_DESCRIBED. An optimizer
    that cannot be hashed (``__eq__`` without ``__hash__``) or whose groups cannot be read
    steps as it would without the bootstrap."""
    import torch

    from advisor.inject import MAX_DESCRIBED

    class Unhashable(torch.optim.AdamW):
        def __eq__(self, other):
            return self is other

    class OddGroups:   # an optimizer-like object whose groups cannot be read
        @property
        def param_groups(self):
            raise RuntimeError("no groups here")

    injector = Injector(RecordingSink(), Window()).install()
    try:
        params = [torch.nn.Parameter(torch.zeros(3)) for _ in range(2)]
        for _ in range(MAX_DESCRIBED + 2):
            optimizer = Unhashable(params, lr=0.1)
            params[0].grad = params[1].grad = torch.ones(3)
            optimizer.step()
            optimizer.step()
        injector._describe(OddGroups())
    finally:
        injector.remove()
    summary = injector.summary()
    assert summary["made_capturable"] == {"tensors": 2, "elements": 6}
    assert summary["optimizers_stepped"] == MAX_DESCRIBED + 3 and len(summary["optimizers"]) == MAX_DESCRIBED
    injector.optimizers.clear()
    injector._describe(OddGroups())   # once more, now that there is room to describe it
    assert injector.optimizers == [{"class": "OddGroups", "error": "RuntimeError: no groups here"}]


def test_a_capturable_or_fused_optimizer_is_not_made_capturable():
    import torch

    from advisor.inject import describe_optimizer

    params = [torch.nn.Parameter(torch.zeros(n)) for n in (5, 2, 2)]
    built = torch.optim.AdamW([{"params": params[:1]}, {"params": params[1:], "capturable": True}], lr=0.1)
    assert describe_optimizer(built) == {"class": "AdamW", "parameters": 3, "made_capturable": 1,
                                         "made_capturable_elements": 5, "torch_class": True,
                                         "made_capturable_groups": 1, "made_capturable_dtypes": ["torch.float32"],
                                         "made_capturable_foreach_off": False}
    fused = torch.optim.Adam(params, lr=0.1)
    for group in fused.param_groups:
        group["fused"] = True   # as Adam(fused=True) on a GPU holds it
    assert describe_optimizer(fused)["made_capturable"] == 0
    # what the calibration needs to step the same update: a subclass, two groups, bfloat16
    # tensors and foreach turned off are said so (advisor.runrecord.capturable_specs skips them)

    class Mine(torch.optim.Adam):
        pass

    halves = [torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16)) for _ in range(2)]
    odd = describe_optimizer(Mine([{"params": halves[:1]}, {"params": halves[1:], "foreach": False}], lr=0.1))
    assert (odd["class"], odd["torch_class"], odd["made_capturable_groups"]) == ("Mine", False, 2)
    assert odd["made_capturable_dtypes"] == ["torch.bfloat16"] and odd["made_capturable_foreach_off"] is True


def test_trained_parameters_are_counted_at_the_first_training_call():
    """A sanity forward in eval mode without gradients comes first, then the script freezes the
    encoder and trains: the 4 tensors that train, not the 6 that existed at the first call. An
    inference loop trains none: no count, so the prediction does not charge it the graphed
    callables' per-gradient host cost."""
    _, injector = run_script("--steps", "2", "--sanity-check", "--freeze-encoder")
    assert injector.summary()["trained_parameters"] == 4
    assert injector.summary()["training_steps"] == 2
    _, injector = run_script("--steps", "3", "--inference")
    assert injector.summary()["inference_calls"] == 3 and injector.summary()["trained_parameters"] is None


def test_ranges_nest_inside_each_iteration():
    """forward (with its children), backward, then the optimizer step, inside the iteration;
    the script's zero_grad, before the forward, between iterations."""
    sink, _ = run_script("--steps", "2")
    start = sink.events.index(("start", ranges.ITERATION))
    assert sink.events[:start] == [("push", ranges.ZERO_GRAD), ("pop",)]
    first = sink.events[start: sink.events.index(("end", start)) + 1]
    assert first == [("start", ranges.ITERATION), ("push", ranges.FORWARD),
                     ("push", "cg-advise:module:encoder"), ("pop",), ("push", "cg-advise:module:middle"), ("pop",),
                     ("push", "cg-advise:module:decoder"), ("pop",), ("pop",),
                     ("start", ranges.BACKWARD), ("end", start + 9), ("push", ranges.OPTIMIZER), ("pop",),
                     ("end", start)]
    assert sink.count("push", ranges.ZERO_GRAD) == 2


def test_warmup_iterations_are_timed_before_the_window_opens():
    """The second half of the warm-up is timed (host clock on a CPU run) and kept in the summary."""
    calls = []
    window = Window(warmup=8, iterations=2, run_to_end=True, on_start=lambda: calls.append("start"))
    _, injector = run_script("--steps", "12", window=window)
    untraced = injector.summary()["untraced"]
    # iteration ends 4..8 timed; the script ends two iterations after the window (ends 10..12)
    assert calls == ["start"] and untraced["chunks"] == [4, 2] and untraced["iterations"] == 6
    assert untraced["host_ms_per_iteration"] > 0 and "gpu_ms_per_iteration" not in untraced


def test_as_many_iterations_are_timed_after_the_window_then_the_script_stops():
    """After the recording window, the bootstrap times as many untraced iterations as it timed
    in the warm-up (a second look at the host, a window later) before it stops the script;
    the baseline is the median of both chunks, each chunk's own median kept."""
    calls = []

    def stop_script():
        raise StopScript

    window = Window(warmup=8, iterations=2, run_to_end=False, on_start=lambda: calls.append("start"),
                    on_stop=lambda: calls.append("stop"), on_exit=stop_script)
    sink = RecordingSink()
    injector = Injector(sink, window)
    with pytest.raises(StopScript):
        run_file(SCRIPT, "--steps", "100", injector=injector)
    untraced = injector.summary()["untraced"]
    assert calls == ["start", "stop"] and injector.iterations_done == 8 + 2 + 4
    assert untraced["iterations"] == 8 and untraced["chunks"] == [4, 4] and len(untraced["host_ms"]) == 8
    # the ranges go on as in the warm-up: Nsight Systems records only inside its capture range
    assert sink.count("start", ranges.ITERATION) == 14


def test_a_script_that_ends_inside_the_second_chunk_keeps_what_it_timed():
    """Ended two iterations after the window: the second chunk holds those two; ended at the
    window's end, only the warm-up's chunk."""
    _, injector = run_script("--steps", "12", window=Window(warmup=8, iterations=2, run_to_end=False))
    assert injector.summary()["untraced"]["chunks"] == [4, 2]
    _, injector = run_script("--steps", "10", window=Window(warmup=8, iterations=2, run_to_end=False))
    assert injector.summary()["untraced"]["chunks"] == [4]


PHASED_SCRIPT = """
import time
import torch
from torch import nn

model = nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2, 4)
for step in range(30):
    time.sleep(0.002 if step < 10 else 0.008)   # slower once the window (iterations 9-10) is over
    model(x).sum().backward()
    opt.step()
"""


def test_the_second_chunk_is_timed_after_the_window(tmp_path):
    """Iterations of 2 ms before the window and 8 ms after it: each chunk's median says which
    it timed, the baseline lies between them, and with --run-to-end the script runs on to its
    end (30 steps) after the second chunk."""
    script = tmp_path / "phased.py"
    script.write_text(PHASED_SCRIPT)
    _, injector = run_file(script, window=Window(warmup=8, iterations=2, run_to_end=True))
    untraced = injector.summary()["untraced"]
    before, after = untraced["host_ms_by_chunk"]
    assert untraced["chunks"] == [4, 4] and 2 <= before < 8 <= after < 30
    assert before <= untraced["host_ms_per_iteration"] <= after and injector.iterations_done == 30


SLEEPING_SCRIPT = """
import time
import torch
from torch import nn

model = nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(2, 4)
for step in range(200):
    time.sleep(0.01)
    model(x).sum().backward()
    opt.step()
"""


def test_the_chunk_after_the_window_goes_on_until_the_baseline_spans_its_seconds(tmp_path, monkeypatch):
    """A host whose speed drifts from second to second is read over seconds: after the
    window, iterations are timed past the warm-up's count until both chunks span the window's
    baseline_seconds, then the script stops; at most MAX_AFTER_ITERATIONS after the window."""
    import advisor.inject as inject

    def stop_script():
        raise StopScript

    script = tmp_path / "sleeping.py"
    script.write_text(SLEEPING_SCRIPT)

    def chunks(seconds):
        injector = Injector(RecordingSink(), Window(warmup=8, iterations=2, run_to_end=False, on_exit=stop_script,
                                                    baseline_seconds=seconds))
        with pytest.raises(StopScript):
            run_file(script, injector=injector)
        return injector.summary()["untraced"]

    spanned = chunks(0.2)
    assert spanned["chunks"][0] == 4 and 4 < spanned["chunks"][1] < 30
    assert sum(spanned["host_ms"]) >= 200 > sum(spanned["host_ms"][:-1])   # it stops at the first that reaches it
    monkeypatch.setattr(inject, "MAX_AFTER_ITERATIONS", 6)
    assert chunks(60.0)["chunks"] == [4, 6]
    assert inject.window_from_env({}).baseline_seconds == inject.BASELINE_SECONDS == 3.0
    assert inject.window_from_env({"CG_ADVISE_BASELINE_SECONDS": "0"}).baseline_seconds == 0.0
    # under torchrun, ranks that each read their own clock would stop apart: none goes on
    assert inject.window_from_env({"WORLD_SIZE": "2"}).baseline_seconds == 0.0


def test_the_window_waits_until_the_warm_up_spans_its_before_seconds(tmp_path, monkeypatch):
    """With baseline_before_seconds, the warm-up's timed half goes on past the warm-up, the
    window waiting, until it spans that long (host clock), at most MAX_BEFORE_ITERATIONS past
    the warm-up; the window then records its iterations from where it opened, and the summary
    says where that was."""
    import advisor.inject as inject

    script = tmp_path / "sleeping.py"
    script.write_text(SLEEPING_SCRIPT)
    opened = []

    def run(before):
        injector = Injector(RecordingSink(), Window(warmup=8, iterations=2, run_to_end=True,
                                                    baseline_before_seconds=before))
        injector.window.on_start = lambda: opened.append(injector.iterations_done)
        run_file(script, injector=injector)
        return injector.summary()

    waited = run(0.2)
    first = waited["untraced"]["chunks"][0]
    assert 4 < first < 30 and waited["window_opened_at"] == opened[-1] == 4 + first
    assert sum(waited["untraced"]["host_ms"][:first]) >= 200 > sum(waited["untraced"]["host_ms"][:first - 1])
    assert run(0.0)["window_opened_at"] == opened[-1] == 8
    # a warm-up of one iteration waits too: its first mark begins the stretch
    injector = Injector(RecordingSink(), Window(warmup=1, iterations=2, run_to_end=True, baseline_before_seconds=0.2))
    run_file(script, injector=injector)
    assert injector.summary()["window_opened_at"] > 10 and sum(injector.summary()["untraced"]["host_ms"]) >= 200
    monkeypatch.setattr(inject, "MAX_BEFORE_ITERATIONS", 3)
    assert run(60.0)["window_opened_at"] == opened[-1] == 11
    assert inject.window_from_env({}).baseline_before_seconds == 0.0
    assert inject.window_from_env({"CG_ADVISE_BASELINE_BEFORE": "3"}).baseline_before_seconds == 3.0
    assert inject.window_from_env({"CG_ADVISE_BASELINE_BEFORE": "3", "WORLD_SIZE": "2"}).baseline_before_seconds == 0.0


def test_a_warm_up_of_one_iteration_times_nothing_after_the_window():
    _, injector = run_script("--steps", "6", window=Window(warmup=1, iterations=2, run_to_end=False))
    assert injector.summary()["untraced"] == {}


SLOW_SCRIPT = """
import time
import torch
from torch import nn


class Slow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        time.sleep(0.020)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(0.010)
        return grad


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)

    def forward(self, x):
        return Slow.apply(self.layer(x))

    def parameters(self, recurse=True):
        if ZEROING:   # model.zero_grad() walks the parameters: 2 ms inside that call
            time.sleep(0.002)
        return super().parameters(recurse)


ZEROING = False


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
opt.register_step_pre_hook(lambda *args: time.sleep(0.005))
x = torch.randn(2, 4)
for _ in range(10):
    time.sleep(0.004)   # the next batch: outside every phase
    ZEROING = True
    model.zero_grad()
    ZEROING = False
    model(x).sum().backward()
    time.sleep(0.003)   # after the backward, before the step (a GradScaler's unscale, clipping)
    opt.step()
"""


def untraced_warm_up(script) -> dict:
    """The untraced figures of a script run under the bootstrap (8 warm-up iterations)."""
    _, injector = run_file(script, window=Window(warmup=8, iterations=1, run_to_end=True))
    return injector.summary()["untraced"]


def test_the_phases_host_time_is_timed_in_the_untraced_warm_up(tmp_path):
    """Forward, backward and optimizer step of each timed warm-up iteration, on the host
    clock, what follows the backward and what runs between iterations: the untraced split of
    the host time (a script that sleeps 20, 10 and 5 ms in the first three, 3 ms between the
    backward and the step and 4 ms before the next forward)."""
    script = tmp_path / "slow.py"
    script.write_text(SLOW_SCRIPT)
    untraced = untraced_warm_up(script)
    assert untraced["chunks"] == [4, 1]   # the script's 10 steps leave one after the window
    forward, backward = untraced["forward_ms_per_iteration"], untraced["backward_ms_per_iteration"]
    optimizer = untraced["optimizer_ms_per_iteration"]
    after, between = untraced["after_backward_ms_per_iteration"], untraced["between_ms_per_iteration"]
    # at least what was slept; a loaded machine may add, never take away
    assert 20 <= forward < 60 and 10 <= backward < 40 and 5 <= optimizer < 30
    # after the backward: the 3 ms before the step and the step itself; between: the next batch
    # and the zero_grad call (2 ms), which is timed on its own too
    assert 8 <= after < 40 and optimizer <= after and 6 <= between < 30
    assert 2 <= untraced["zero_grad_between_ms_per_iteration"] <= between - 4
    assert untraced["host_ms_per_iteration"] - forward - backward - optimizer >= 7
    # the iteration is the forward, what follows it up to the step's end, and the time between;
    # each figure is a median over the iterations, and a sum of medians may pass the median of
    # the sums by a little (CI read 47.5030 against 47.5035 ms): 1 ms of slack
    phases = forward + backward + after + between
    assert untraced["host_ms_per_iteration"] >= phases - 1.0 and phases >= 42


TWO_MODELS = """
import time
import torch
from torch import nn


class Slow(nn.Module):
    def __init__(self, seconds):
        super().__init__()
        self.layer, self.seconds = nn.Linear(4, 4), seconds

    def forward(self, x):
        time.sleep(self.seconds)
        return self.layer(x)


def train(net, steps):
    opt = torch.optim.SGD([*net.parameters(), *head.parameters()], lr=0.01)
    x = torch.randn(2, 4)
    for _ in range(steps):
        opt.zero_grad()
        loss = head(net(x)).sum() + 0.1 * net(x + 1).sum()   # net called twice, head once
        loss.backward()
        opt.step()


head = Slow(0.004)
encoder = Slow(0.002)
train(encoder, 10)
"""


def test_every_top_level_module_of_the_step_is_marked_with_its_names_and_own_time(tmp_path):
    """An encoder called twice a step and a head called once: both are top-level modules,
    marked as forward ranges in every iteration (before, only the first one called was, once
    the global hooks were traded for wrappers of it), and each has its names in the script
    (``net`` in the function that calls it, ``encoder`` where it is built) and its own host
    time and training calls per iteration: 2 x 2 ms and 4 ms slept."""
    script = tmp_path / "two.py"
    script.write_text(TWO_MODELS)
    sink, injector = run_file(script, window=Window(warmup=8, iterations=1, run_to_end=True))
    summary = injector.summary()
    assert summary["models"] == [["net", "encoder"], ["head"]]
    assert sink.count("push", ranges.FORWARD) == 3 * 10
    untraced = summary["untraced"]
    assert untraced["forward_calls_by_model"] == {"0": 2, "1": 1}
    by_model = untraced["forward_ms_by_model"]
    assert 4 <= by_model["0"] < 20 and 4 <= by_model["1"] < 20
    assert by_model["0"] + by_model["1"] <= untraced["forward_ms_per_iteration"] + 1.0


def _distillation(tmp_path, teacher_first: bool):
    """(sink, summary) of TWO_MODELS made a distillation step: a teacher of two children (4 ms)
    run under no_grad before or after the student, ``net`` (2 ms), trains on its output."""
    step = ("        with torch.no_grad():\n            target = teacher(x)\n        out = net(x)\n" if teacher_first
            else "        out = net(x)\n        with torch.no_grad():\n            target = teacher(x)\n")
    script = tmp_path / "distill.py"
    script.write_text(TWO_MODELS.replace(
        "        loss = head(net(x)).sum() + 0.1 * net(x + 1).sum()   # net called twice, head once\n",
        step + "        loss = (out - target).pow(2).sum()\n").replace(
        "head = Slow(0.004)\n", "head = Slow(0.004)\nteacher = nn.Sequential(Slow(0.003), Slow(0.001))\n"))
    sink, injector = run_file(script, window=Window(warmup=8, iterations=1, run_to_end=True))
    return sink, injector.summary()


def test_a_second_models_no_grad_calls_are_not_the_steps_forward(tmp_path):
    """Distillation: the student trains, a teacher (a module with children) runs under
    no_grad after it. The teacher's calls are no forward of the step and no inference
    iteration: ten steps are ten iterations, ten forward ranges, the student's children's
    ranges only; the teacher has its names, and no host time or calls of a training forward."""
    sink, summary = _distillation(tmp_path, teacher_first=False)
    assert summary["models"] == [["net", "encoder"], ["teacher"]]
    assert summary["iterations"] == summary["training_steps"] == 10 and summary["inference_calls"] == 0
    assert sink.count("push", ranges.FORWARD) == 10
    assert sink.count("push", ranges.MODULE + "layer") == 10 and sink.count("push", ranges.MODULE + "0") == 0
    assert list(summary["untraced"]["forward_calls_by_model"]) == ["0"]


def test_a_teacher_called_first_without_grad_makes_no_iterations_of_its_own(tmp_path):
    """The distillation tutorial calls its teacher first, under no_grad: the first top-level
    module, so its calls are marked (forward ranges, host time: the step's host work), but
    once the student trains they are no inference iterations (before, each step counted
    twice, and the untraced baseline timed half-steps). Only the first call, before any
    training, counts one."""
    sink, summary = _distillation(tmp_path, teacher_first=True)
    assert summary["models"] == [["teacher"], ["net", "encoder"]]
    assert summary["training_steps"] == 10 and summary["inference_calls"] == 1 and summary["iterations"] == 11
    assert sink.count("push", ranges.FORWARD) == 20
    untraced = summary["untraced"]
    assert untraced["forward_calls_by_model"] == {"0": 0, "1": 1}
    assert untraced["forward_ms_by_model"]["0"] >= 4 and untraced["forward_ms_by_model"]["1"] >= 2
    assert untraced["host_ms_per_iteration"] >= 6   # a whole step: the teacher's 4 ms and the student's 2
    # each step's range opens at the teacher's call (the step a full-iteration graph captures):
    # every forward range but the very first lies inside an iteration range
    assert _forwards_outside_iterations(sink) == 1


def _forwards_outside_iterations(sink) -> int:
    """Forward ranges pushed while no iteration range is open (a start's handle is its index)."""
    open_iterations, outside = set(), 0
    for position, event in enumerate(sink.events):
        if event[0] == "start" and event[1] == ranges.ITERATION:
            open_iterations.add(position)
        elif event[0] == "end":
            open_iterations.discard(event[1])
        elif event[0] == "push" and event[1] == ranges.FORWARD and not open_iterations:
            outside += 1
    return outside


CHECKPOINTED = """
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=REENTRANT)
        return self.head(x)


model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(6):
    loss = model(torch.randn(4, 8, requires_grad=True)).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


@pytest.mark.parametrize("reentrant", [False, True])
def test_a_checkpoints_recomputation_in_the_backward_is_no_call_of_the_step(tmp_path, reentrant):
    """Activation checkpointing runs blocks again inside the backward, outside any module call:
    not top-level calls of the step. Found by a review: the blocks were taken for top-level
    modules, a recomputation that ends in an exception left the depth above 0, and the
    profile counted 1 iteration of 6, with a range left open (non-reentrant), or 24 forward
    ranges for 6 (reentrant)."""
    script = tmp_path / "ckpt.py"
    script.write_text(CHECKPOINTED.replace("REENTRANT", str(reentrant)))
    sink, injector = run_file(script)
    summary = injector.summary()
    assert summary["training_steps"] == summary["iterations"] == 6
    assert sink.count("push", ranges.FORWARD) == 6 and summary["models"] == [["model"]]
    assert sink.depth == 0 and not sink.open_ranges and injector._depth == 0


def test_a_caught_exception_in_the_model_leaves_the_ranges_balanced(tmp_path):
    """A forward that raises, caught by the script (a batch skipped), after the bootstrap's
    wrappers took over: its ranges close, and the steps after it are counted."""
    script = tmp_path / "raises.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.layer = nn.Linear(4, 1)\n\n    def forward(self, x):\n"
        "        if x.shape[0] == 3:\n            raise ValueError('odd batch')\n        return self.layer(x)\n\n\n"
        "model = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for n in (2, 2, 3, 2, 2):\n    try:\n        model(torch.randn(n, 4)).sum().backward()\n"
        "    except ValueError:\n        continue\n    opt.step()\n    opt.zero_grad()\n")
    sink, injector = run_file(script)
    assert injector.summary()["training_steps"] == 4
    assert sink.depth == 0 and injector._depth == 0 and not injector._pushed


def test_a_frozen_models_call_after_the_last_step_leaves_no_range_open(tmp_path):
    """A perceptual network (never trained) scores the model after training: its call opens
    an iteration, as a distillation teacher's does, that no step ends; at the script's end
    its range is closed, not counted."""
    script = tmp_path / "percept.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\nfeatures = nn.Linear(8, 8).eval()\nmodel = nn.Linear(8, 8)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.01)\nfor _ in range(4):\n"
        "    loss = (features(model(torch.randn(4, 8))) ** 2).mean()\n    loss.backward()\n"
        "    opt.step()\n    opt.zero_grad()\nwith torch.no_grad():\n"
        "    score = features(model(torch.randn(4, 8))).mean()\n")
    sink, injector = run_file(script)
    assert injector.summary()["training_steps"] == 4 and not sink.open_ranges and sink.depth == 0


GAN = """
import time
import torch
from torch import nn

netD, netG = nn.Linear(4, 1), nn.Linear(2, 4)
optD = torch.optim.SGD(netD.parameters(), lr=0.01)
optG = torch.optim.SGD(netG.parameters(), lr=0.01)
for _ in range(14):
    time.sleep(0.004)   # the loop's own host work: the next batch
    netD.zero_grad()
    netD(torch.randn(8, 4)).mean().backward()
    fake = netG(torch.randn(8, 2))
    netD(fake.detach()).mean().backward()
    time.sleep(0.003)
    optD.step()
    netG.zero_grad()
    netD(fake).mean().backward()   # the generator's step: a forward of its own after optD's
    time.sleep(0.005)
    optG.step()
"""


def test_a_gan_loop_iteration_is_one_iteration_ended_by_its_last_optimizer(tmp_path):
    """DCGAN's loop: the discriminator steps, then the generator's loss runs a forward of its
    own and its optimizer steps. Once the second loop iteration shows the order, the
    generator's step ends the iteration: 14 loop iterations are 15 iterations (the first one,
    before the order is known, two), each timed whole (3 + 5 ms slept in it), where ending one
    at every step made 28 of half a loop iteration each (the profile's eager time half of
    tune's), and the loop's own host work (4 ms) is between iterations, not inside them (ended
    at the first optimizer, it fell inside, read as captured)."""
    script = tmp_path / "gan.py"
    script.write_text(GAN)
    sink, injector = run_file(script, window=Window(warmup=8, iterations=1, run_to_end=True))
    summary = injector.summary()
    assert summary["training_steps"] == 15 == sink.count("start", ranges.ITERATION)
    assert not sink.open_ranges
    assert summary["models"] == [["netD"], ["netG"]]
    untraced = summary["untraced"]
    assert untraced["host_ms_per_iteration"] >= 12
    assert 4 <= untraced["between_ms_per_iteration"] < 7
    assert untraced["after_backward_ms_per_iteration"] >= 5


DYNAMIC_SHAPES = """
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(13):
    rows = 8 if step % 4 else 6 + step   # mostly 8 rows; every fourth batch another size
    loss = model(torch.randn(rows, 4), scale=torch.ones(1)).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def test_input_shapes_of_the_training_calls_are_counted_against_the_first(tmp_path):
    """patch captures a graph for the first call's shapes and runs other shapes eagerly: the
    bootstrap counts, per top-level module, the training calls with the first counted call's
    layout (positional and keyword tensors) and the distinct layouts. Calls 3..13 (the second
    adopts the module): 8 of 11 with 8 rows, 3 of other sizes (10, 14, 18 rows)."""
    script = tmp_path / "shapes.py"
    script.write_text(DYNAMIC_SHAPES.replace("model(torch.randn(rows, 4), scale=torch.ones(1))",
                                             "model(torch.randn(rows, 4))"))
    _, injector = run_file(script)
    assert injector.summary()["input_layouts"] == {"0": {"calls": 11, "first_share": 8 / 11, "distinct": 4}}


def test_keyword_tensors_count_in_the_layout(tmp_path):
    """A keyword argument's shape is part of the layout (Hugging Face models take every input by
    keyword): a module taking one counts it beside the positional ones."""
    script = tmp_path / "kw.py"
    script.write_text("import torch\nfrom torch import nn\n\n"
                      "class Scaled(nn.Linear):\n"
                      "    def forward(self, x, scale=None):\n"
                      "        return super().forward(x) * scale.sum()\n\n"
                      "model = Scaled(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                      "for step in range(7):\n"
                      "    model(torch.randn(8, 4), scale=torch.ones(1 + step % 2)).mean().backward()\n"
                      "    opt.step()\n    opt.zero_grad()\n")
    _, injector = run_file(script)
    # calls 3..7: scale of 1, 2, 1, 2, 1 elements; the first counted one had 1
    assert injector.summary()["input_layouts"] == {"0": {"calls": 5, "first_share": 0.6, "distinct": 2}}


def test_a_backward_run_inside_a_backward_is_timed_as_part_of_it(tmp_path):
    """A custom Function whose backward runs backward() on a graph of its own, then works on
    (10 ms): the whole outer backward is the backward phase, and what follows it starts at its
    end. Timed on its own, the inner call's end closed the outer phase: the 10 ms after it
    went to after_backward instead."""
    script = tmp_path / "nested.py"
    script.write_text(SLOW_SCRIPT.replace(
        "    def backward(ctx, grad):\n        time.sleep(0.010)\n",
        "    def backward(ctx, grad):\n        with torch.enable_grad():\n"
        "            torch.autograd.backward(torch.ones(1, requires_grad=True).sum())\n"
        "        time.sleep(0.010)\n"))
    untraced = untraced_warm_up(script)
    assert 10 <= untraced["backward_ms_per_iteration"] < 40
    # after the backward: the 3 ms before the step and the step (5 ms), not the inner call's 10 ms
    assert 8 <= untraced["after_backward_ms_per_iteration"] < 16


def test_a_second_optimizer_is_not_time_between_iterations(tmp_path):
    """Two optimizers (a GAN): the iteration ends at the first step, the second step follows;
    between iterations is what runs after the last step (the next batch and zero_grad, 6 ms
    here), not the second step's 6 ms too."""
    script = tmp_path / "two.py"
    script.write_text(SLOW_SCRIPT.replace(
        "    opt.step()\n",
        "    opt.step()\n    opt2.step()\n").replace(
        "x = torch.randn(2, 4)\n",
        "x = torch.randn(2, 4)\nopt2 = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)\n"
        "opt2.register_step_pre_hook(lambda *args: time.sleep(0.006))\n"))
    untraced = untraced_warm_up(script)
    assert 6 <= untraced["between_ms_per_iteration"] < 10


def test_an_inference_loop_times_its_forward_only():
    _, injector = run_script("--steps", "12", "--inference", window=Window(warmup=8, iterations=2, run_to_end=True))
    untraced = injector.summary()["untraced"]
    assert untraced["chunks"] == [4, 2]
    assert 0 < untraced["forward_ms_per_iteration"] <= untraced["host_ms_per_iteration"]
    assert not {f"{phase}_ms_per_iteration" for phase in ("backward", "optimizer", "after_backward", "between")} & set(untraced)


def test_inference_iterations_are_forward_calls():
    sink, injector = run_script("--steps", "7", "--inference")
    assert sink.count("start") == 0
    assert sink.count("push", ranges.FORWARD) == 7
    assert injector.summary()["iterations"] == 7 and injector.summary()["inference_calls"] == 7


def test_window_starts_stops_and_exits():
    calls = []

    def stop_script():
        raise StopScript

    window = Window(warmup=2, iterations=3, run_to_end=False, on_start=lambda: calls.append("start"),
                    on_stop=lambda: calls.append("stop"), on_exit=stop_script)
    with pytest.raises(StopScript):
        run_script("--steps", "100", window=window)
    assert calls == ["start", "stop"]


def test_window_run_to_end_lets_the_script_finish(capsys):
    calls = []
    window = Window(warmup=0, iterations=2, run_to_end=True, on_start=lambda: calls.append("start"),
                    on_stop=lambda: calls.append("stop"))
    _, injector = run_script("--steps", "5", window=window)
    assert calls == ["start", "stop"] and injector.iterations_done == 5
    assert capsys.readouterr().out.splitlines()[-1] == "done"


def test_a_sink_gated_to_the_window_emits_the_windows_ranges_alone_and_balanced():
    """CG_ADVISE_RANGES=window (a bench option): no range outside the recording window, and a
    range opened before it (none here: the window opens and closes at iteration ends) could
    never be closed inside it."""
    from advisor.inject import NvtxSink

    sink, recorded = NvtxSink(in_window_only=True), RecordingSink()
    sink._emit_push, sink._emit_pop, sink._emit_start, sink._emit_end = (recorded.push, recorded.pop,
                                                                         recorded.start, recorded.end)
    window = Window(warmup=2, iterations=3, run_to_end=True)
    _, injector = run_file(SCRIPT, "--steps", "8", window=window, injector=Injector(sink, window))
    assert injector.iterations_done == 8
    assert recorded.count("start", ranges.ITERATION) == 3   # of 8 iterations, the window's 3
    assert recorded.depth == 0 and not recorded.open_ranges and not sink.active
    assert recorded.count("push", ranges.FORWARD) == 3


def test_bootstrap_process_passes_argv_and_writes_summary(tmp_path):
    summary = tmp_path / "summary.json"
    env = {**os.environ, "CG_ADVISE_SUMMARY": str(summary), "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "advisor.inject", SCRIPT, "--steps", "4", "--help"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    # the script's own --help answered, and its exit code came through
    assert result.returncode == 0 and result.stdout.startswith("usage: train_cpu.py")
    result = subprocess.run([sys.executable, "-m", "advisor.inject", SCRIPT, "--steps", "4"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["argv ['--steps', '4']", "done"]
    assert json.loads(summary.read_text())["iterations"] == 4


def test_the_bootstrap_process_names_each_top_level_module_as_the_script_does(tmp_path):
    """Run as ``python -m advisor.inject``, as profile runs it (the bootstrap is then
    __main__, and so is the script once it runs): the names come from the script's frames,
    never from the bootstrap's own (on the GPU, a first version read ``module`` and
    ``self._root`` there, and so matched no model patch names)."""
    script, summary = tmp_path / "two.py", tmp_path / "summary.json"
    script.write_text(TWO_MODELS)
    env = {**os.environ, "CG_ADVISE_SUMMARY": str(summary), "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "advisor.inject", str(script)],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(summary.read_text())["models"] == [["net", "encoder"], ["head"]]


def test_bootstrap_runs_a_module(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(open(SCRIPT).read())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "advisor.inject", "-m", "pkg.train", "--steps", "2"],
                            capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["argv ['--steps', '2']", "done"]


def test_torch_backend_records_the_window_as_a_kineto_trace(tmp_path):
    """CG_ADVISE_KINETO_TRACE: torch.profiler records iterations 3..5 of a real CPU run; the
    Chrome trace holds exactly the window's iteration ranges, with the phase ranges inside."""
    trace, summary = tmp_path / "t.json.gz", tmp_path / "s.json"
    env = {**os.environ, "CG_ADVISE_WARMUP": "3", "CG_ADVISE_ITERATIONS": "2", "CG_ADVISE_RUN_TO_END": "1",
           "CG_ADVISE_KINETO_TRACE": str(trace), "CG_ADVISE_SUMMARY": str(summary)}
    result = subprocess.run([sys.executable, "-m", "advisor.inject", SCRIPT, "--steps", "7"],
                            capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    import gzip

    events = json.load(gzip.open(trace))["traceEvents"]
    names = [e["name"] for e in events if e.get("cat") == "user_annotation" and e["name"].startswith(ranges.PREFIX)]
    assert names.count(ranges.ITERATION) == 2
    assert names.count(ranges.BACKWARD) == 2 and names.count(ranges.OPTIMIZER) == 2
    assert sorted({n for n in names if n.startswith(ranges.MODULE)}) == [ranges.MODULE + c for c in sorted(CHILDREN)]
    assert json.loads(summary.read_text())["iterations"] == 7


def test_a_loop_that_updates_its_parameters_by_hand_has_iterations(monkeypatch):
    """The word-language-model example's update (`p.data.add_(p.grad, alpha=-lr)`, no optimizer):
    each step ends at the next step's first forward. Before, such a loop ran 0 iterations and a
    profile's window never opened ("ran 0 iterations, not more than --warmup 50", seen on the
    H100 for tests/corpus/manual_sgd_update.py and rnn_hidden_state.py). Six steps, six
    iterations (the last closed at the script's end), each holding its forward and backward, no
    optimizer, and the model.zero_grad() that opens the next step's."""
    monkeypatch.setenv("CG_STEPS", "6")
    calls = []
    window = Window(warmup=2, iterations=2, run_to_end=True, on_start=lambda: calls.append("start"))
    sink, injector = run_file(ROOT / "tests" / "corpus" / "manual_sgd_update.py", window=window)
    summary = injector.summary()
    assert summary["iterations"] == summary["training_steps"] == 6 == summary["steps_ended_at_next_forward"]
    assert summary["optimizers_stepped"] == 0
    assert calls == ["start"] and not sink.open_ranges and sink.depth == 0
    starts = [i for i, e in enumerate(sink.events) if e == ("start", ranges.ITERATION)]
    assert len(starts) == 6
    for begin, following in zip(starts, starts[1:] + [len(sink.events)]):
        inside = sink.events[begin:following]
        assert inside.index(("end", begin)) == len(inside) - 1   # closed right before the next one starts
        assert ("push", ranges.FORWARD) in inside and ("start", ranges.BACKWARD) in inside
        assert ("push", ranges.OPTIMIZER) not in inside
    assert all(("push", ranges.ZERO_GRAD) in sink.events[a:b] for a, b in zip(starts, starts[1:]))


def test_a_hand_update_loop_that_accumulates_ends_its_step_where_it_zeroes(tmp_path):
    """Without an optimizer, a forward after a backward ends the step only once the gradients
    were zeroed since (a zero_grad() call, or the first parameter's gradient set to None):
    hand-written accumulation over two micro-steps, and a train-mode forward that logs after
    the backward, stay in their step. A loop that sets ``p.grad = None`` by hand ends each step
    at the next forward."""
    def loop(name, steps, tail):
        """A Linear trained by hand: a backward each step, then ``tail`` (indented lines)."""
        script = tmp_path / f"{name}.py"
        script.write_text("import torch\nfrom torch import nn\nmodel = nn.Linear(4, 1)\n"
                          f"for step in range({steps}):\n    model(torch.randn(8, 4)).sum().backward()\n" + tail)
        sink, injector = run_file(script)
        assert not sink.open_ranges
        return injector.summary()["iterations"], sink.count("start", ranges.ITERATION)

    update = "with torch.no_grad():\n    for p in model.parameters():\n        p -= 0.1 * p.grad\n"
    indent = lambda text, by: "".join(" " * by + line + "\n" for line in text.splitlines())  # noqa: E731
    accumulating = ("    if step % 2 == 1:\n"
                    "        model(torch.randn(8, 4))   # a logging forward, train mode, after the backward\n"
                    + indent(update, 8) + "        model.zero_grad()\n")
    assert loop("accumulate", 8, accumulating) == (4, 4)
    assert loop("by_hand", 5, indent(update, 4) + "            p.grad = None\n") == (5, 5)


def test_a_second_forward_before_the_first_optimizer_step_is_the_same_step(tmp_path):
    """With an optimizer, two forwards and backwards before its step (micro-steps, a GAN's two
    discriminator calls) are one iteration, the first one too, before any step has run."""
    script = tmp_path / "micro.py"
    script.write_text("import torch\nfrom torch import nn\n"
                      "model = nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                      "for _ in range(4):\n"
                      "    for _ in range(2):\n"
                      "        model(torch.randn(8, 4)).sum().backward()\n"
                      "    opt.step()\n    opt.zero_grad()\n")
    sink, injector = run_file(script)
    assert injector.summary()["iterations"] == 4 == sink.count("start", ranges.ITERATION)
    assert sink.count("start", ranges.BACKWARD) == 8
