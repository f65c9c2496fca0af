"""Paired timing of graphed callables (fwd_bwd, submodule): graphed and eager windows alternate
in the candidate's own process, and tune ranks the candidate by their ratio. The GPU evidence
is bench/paired_windows_probe.py and bench/gpu_paired_tune.sh; here the arithmetic, the window
schedule (on a stand-in clock) and the switch that lets a graphed module run eagerly."""

import ast
import copy
import json
import types
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from conftest import requires_cuda
from tuner.harness import HOLDER_CLASS, Settings, StepTimer, paired_ratios
from tuner.search import Candidate, choose, eager_slowdown
from tuner.templates import FORWARD_HOLDER, GRAPHED_FORWARD


def test_each_eager_window_is_set_against_both_graphed_neighbours():
    windows = [1.0, 2.0, 1.25, 3.0, 1.5]    # graphed, eager, graphed, eager, graphed
    assert paired_ratios(windows) == pytest.approx([2.0, 2.0 / 1.25, 3.0 / 1.25, 3.0 / 1.5])
    assert paired_ratios([1.0, 2.0]) == pytest.approx([2.0])    # no graphed window after the last eager one
    assert paired_ratios([1.0]) == []


def test_a_paired_candidate_is_ranked_at_the_eager_runs_host_speed():
    candidate = Candidate("fwd_bwd", status="ok", ms_per_iter=0.8, correct=True, paired_speedup=1.5)
    candidate.bind_to_eager(2.0)
    gain = 1.5 / eager_slowdown("fwd_bwd")
    assert candidate.measured_ms == 0.8                       # what its own process timed
    assert candidate.ms_per_iter == pytest.approx(2.0 / gain)
    candidate.bind_to_eager(3.0)                              # bound once: a second call changes nothing
    assert candidate.ms_per_iter == pytest.approx(2.0 / gain)
    unpaired = Candidate("forward", status="ok", ms_per_iter=0.8, correct=True)
    unpaired.bind_to_eager(2.0)
    assert (unpaired.ms_per_iter, unpaired.measured_ms) == (0.8, None)


def test_a_paired_graph_is_never_ranked_faster_than_the_gpu_work_of_its_iteration():
    """A GPU-bound full-iteration graph timed on a fast host (15x paired) against an eager run
    on a slow one: eager's ms over the gain would be faster than the GPU can run the
    iteration's kernels; the profile's GPU-busy time is the floor."""
    candidate = Candidate("full_iteration", status="ok", ms_per_iter=0.15, correct=True, paired_speedup=15.0)
    candidate.bind_to_eager(1.5, gpu_busy_ms=0.13)
    assert candidate.ms_per_iter == pytest.approx(0.13) and candidate.measured_ms == 0.15
    loose = Candidate("full_iteration", status="ok", ms_per_iter=0.15, correct=True, paired_speedup=15.0)
    loose.bind_to_eager(1.5, gpu_busy_ms=0.05)
    assert loose.ms_per_iter == pytest.approx(1.5 / (15.0 / eager_slowdown("full_iteration")))


def test_a_paired_candidates_noise_is_its_own_ratios_not_the_eager_process():
    ratios = [1.30, 1.32, 1.28, 1.31, 1.29, 1.30, 1.33, 1.27]
    paired = Candidate("fwd_bwd", status="ok", ms_per_iter=1.0, correct=True, paired_speedup=1.30,
                       paired_ratios=ratios, window_ms=[1.0, 3.0, 1.0, 3.0])
    assert paired.spread < 0.05                               # the windows' 3x swing is not its noise
    paired.paired_runs = [1.2, 1.5]
    assert paired.spread == pytest.approx(1.5 / 1.2 - 1)      # several processes: their paired speedups
    paired.paired_runs = None
    paired.bind_to_eager(1.4)                                 # 1.30 / 1.07 = 1.21x
    assert choose(1.4, [paired], eager_spread=0.5).winner == "fwd_bwd"
    # the same gain timed against the eager process is within that process's 50 % spread
    unpaired = Candidate("fwd_bwd", status="ok", ms_per_iter=paired.ms_per_iter, correct=True)
    assert choose(1.4, [unpaired], eager_spread=0.5).winner == "eager"


class _Clock:
    """A stand-in for CUDA events: the host clock advanced by each step."""

    def __init__(self):
        self.now = 0.0

    def event(self, enable_timing=True):
        clock = self

        class Event:
            def record(self):
                self.at = clock.now

            def elapsed_time(self, end):
                return end.at - self.at
        return Event()


def _stand_in_torch(clock, graphed_callables=None, autograd=None):
    cuda = types.SimpleNamespace(is_available=lambda: True, Event=clock.event, synchronize=lambda: None,
                                 reset_peak_memory_stats=lambda: None, max_memory_allocated=lambda: 0,
                                 make_graphed_callables=graphed_callables, is_current_stream_capturing=lambda: False,
                                 current_stream=lambda: "default", default_stream=lambda: "default")
    return types.SimpleNamespace(cuda=cuda, nn=torch.nn, save=torch.save, is_grad_enabled=torch.is_grad_enabled,
                                 autograd=autograd or types.SimpleNamespace(backward=lambda *a, **k: None))


def test_windows_alternate_graphed_and_eager_and_give_their_ratio(tmp_path):
    clock = _Clock()
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, to_end=True)
    timer = StepTimer(settings, str(tmp_path / "result.json"), _stand_in_torch(clock))
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer.m.toggled = 1                                       # a graphed module that can run eagerly
    kinds = []
    for _ in range(settings.warmup + settings.iterations):
        kinds.append("eager" if timer.eager_window else "graphed")
        clock.now += 3.0 if timer.eager_window else 1.0      # an eager step takes 3 ms, a graphed one 1 ms
        timer._step()
    # four windows of 10 steps after the warm-up: graphed, eager, graphed, eager
    assert kinds[:12] == ["graphed"] * 12
    assert kinds[12:22] == ["eager"] * 10 and kinds[22:32] == ["graphed"] * 10 and kinds[32:] == ["eager"] * 10
    assert timer.m.window_ms == [1.0, 1.0] and timer.m.eager_window_ms == [3.0, 3.0]
    assert timer.m.paired_speedup == pytest.approx(3.0) and timer.m.ms_per_iter == 1.0
    assert not timer.eager_window                             # after timing the script runs on graphed


def test_without_a_switchable_module_the_windows_are_all_graphed(tmp_path):
    clock = _Clock()
    settings = Settings(warmup=1, iterations=20, repeats=1, paired=True)
    timer = StepTimer(settings, str(tmp_path / "result.json"), _stand_in_torch(clock))
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    for _ in range(settings.warmup + settings.iterations):
        clock.now += 1.0
        timer._step()
    assert timer.m.window_ms == [1.0, 1.0] and timer.m.paired_speedup is None and timer.m.eager_window_ms == []


def test_a_graphed_module_or_function_runs_eagerly_in_an_eager_window(tmp_path):
    def make_graphed_callables(callables, sample_args, **kwargs):   # what torch does to a module: a new forward
        def graph_of(fn):
            return lambda *args: ("graphed", fn(*args))

        def graphed(c):
            if isinstance(c, torch.nn.Module):
                c.forward = graph_of(c.forward)
                return c
            return graph_of(c)
        return graphed(callables) if not isinstance(callables, tuple) else tuple(map(graphed, callables))

    stand_in = _stand_in_torch(_Clock(), make_graphed_callables)
    timer = StepTimer(Settings(paired=True), str(tmp_path / "result.json"), stand_in)
    timer._toggle_graphed_callables()
    module = torch.nn.Identity()
    assert stand_in.cuda.make_graphed_callables(module, (torch.ones(1),)) is module
    (function,) = stand_in.cuda.make_graphed_callables((lambda x: x + 1,), ((torch.ones(1),),))
    assert module(2)[0] == "graphed" and function(2) == ("graphed", 3)
    timer.eager_window = True
    assert module(2) == 2 and function(2) == 3
    timer.eager_window = False
    child, double = torch.nn.Identity(), (lambda x: 2 * x)
    got_child, got_double = stand_in.cuda.make_graphed_callables((child, double), ((1,), (1,)))
    assert got_child is child and child(3)[0] == "graphed" and got_double(3) == ("graphed", 6)
    timer.eager_window = True
    assert child(3) == 3 and got_double(3) == 6
    assert timer.m.toggled == 4


def test_a_patchs_graphed_module_runs_only_its_own_forward_in_an_eager_window(tmp_path):
    """A fwd_bwd patch sets a forward (``_CgForward``) that checks each call before it replays
    the graph or runs eagerly; the eager windows bypass those checks and run the module's own
    forward, as the user's eager loop does, while the graphed windows go through them."""
    namespace = {"torch": torch, "_cg_types": types, "_cg_copy": copy}
    exec(FORWARD_HOLDER, namespace)
    calls = []
    stand_in = _stand_in_torch(_Clock(), _switchable_graphs(calls))
    timer = StepTimer(Settings(paired=True), str(tmp_path / "result.json"), stand_in)
    timer._toggle_graphed_callables()
    module = _Recorder(calls)
    eager_forward = module.forward
    positional = []

    def forward(x):   # as the template's: its checks, a capture at the first call, then the graph
        calls.append("checks")
        if not positional or x == "capture again":
            positional[:] = [stand_in.cuda.make_graphed_callables(_Recorder(calls), (x,))]
        return positional[0](x) if module is not None else eager_forward(x)

    module.forward = namespace["_CgForward"](forward, module)
    module(1)
    assert calls == ["checks", "graphed"]
    timer.eager_window = True
    del calls[:]
    module(1)
    assert calls == ["eager"]
    timer.eager_window = False
    module("capture again")                                    # switched once: no switch of a switch
    timer.eager_window = True
    del calls[:]
    module(1)
    assert calls == ["eager"] and timer.m.toggled == 2


def test_the_patchs_capture_is_where_the_harness_looks_for_the_module_and_its_forward():
    """tuner/harness.py _switch_patch_holder reads the caller of make_graphed_callables: a
    function named forward that sees ``module`` and ``eager_forward``. The template must keep
    that shape, or the eager windows would run the patch's checks again."""
    tree = ast.parse(GRAPHED_FORWARD)
    callers = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
               and any(isinstance(call, ast.Call) and ast.unparse(call.func) == "torch.cuda.make_graphed_callables"
                       for call in ast.walk(node))]
    innermost = [f for f in callers if not any(g is not f and g in ast.walk(f) for g in callers)]
    assert [f.name for f in innermost] == ["forward"]
    names = {n.id for n in ast.walk(innermost[0]) if isinstance(n, ast.Name)}
    assert {"module", "eager_forward"} <= names
    assert f"class {HOLDER_CLASS}:" in FORWARD_HOLDER and FORWARD_HOLDER in GRAPHED_FORWARD


class _TracedOrNot(torch.nn.Module):
    """+1 where dynamo traces it (a compiled call), +2 where it runs as Python (eager)."""

    def forward(self, x):
        return x + (1 if torch.compiler.is_compiling() else 2)


def test_what_torch_compile_compiled_runs_uncompiled_in_an_eager_window(tmp_path):
    """The compile scope timed paired: the patch's compiled alias of a model (and a compiled
    function), on a line the patch marks, runs the model as the loop did for an eager window
    and compiled again after; the alias stays the module torch.compile made (its _orig_mod).
    What the script compiles itself (a loss, a decorated function) stays compiled in every
    window, as in the eager process. Real torch.compile, dynamo's eager backend."""
    stand_in = _stand_in_torch(_Clock())
    stand_in.compile = torch.compile
    timer = StepTimer(Settings(paired=True), str(tmp_path / "result.json"), stand_in)
    timer._toggle_compiled()
    model = _TracedOrNot()
    try:
        alias = stand_in.compile(model, backend="eager")  # cg-advise: scope compile
        function = stand_in.compile(lambda x: x * 3 + (1 if torch.compiler.is_compiling() else 2), backend="eager")  # cg-advise: scope compile
        own = stand_in.compile(_TracedOrNot(), backend="eager")
        decorate = stand_in.compile(backend="eager")  # cg-advise: scope compile
        x = torch.zeros(2)
        assert isinstance(alias, torch.nn.Module) and alias._orig_mod is model
        assert alias(x).tolist() == [1.0, 1.0] and function(x).tolist() == [1.0, 1.0]
        timer.eager_window = True
        assert alias(x).tolist() == [2.0, 2.0] and function(x).tolist() == [2.0, 2.0]
        assert own(x).tolist() == [1.0, 1.0] and decorate(lambda x: x + 1)(x).tolist() == [1.0, 1.0]
        timer.eager_window = False
        assert alias(x).tolist() == [1.0, 1.0] and timer.m.toggled == 2
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("change, why", [
    ({"warmup": 2, "iterations": 20, "repeats": 5, "check_steps": 5}, "correctness check at step 5"),
    ({"kind": "inference"}, "an inference loop"),
])
def test_pairing_is_left_off_where_the_check_would_see_eager_or_the_loop_does_not_train(tmp_path, change, why):
    """A fitted window of 2 steps after a warm-up of 2 would put step 5, the correctness
    snapshot's, in an eager window; an inference loop is timed by its model calls. Either is
    timed unpaired, and says why."""
    clock = _Clock()
    settings = Settings(**{"warmup": 2, "iterations": 40, "repeats": 2, "paired": True, **change})
    timer = StepTimer(settings, str(tmp_path / "result.json"), _stand_in_torch(clock))
    assert not timer._pairs()
    timer.m.unpaired_why = timer._why_unpaired()
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer.m.toggled = 1
    for _ in range(settings.warmup + settings.iterations):
        assert not timer.eager_window
        clock.now += 1.0
        timer._step()
    assert timer.m.paired_speedup is None and why in timer.m.unpaired_why
    assert len(timer.m.window_ms) == settings.repeats


def _switchable_graphs(calls):
    """A stand-in make_graphed_callables whose graphed module records "graphed" per call."""
    def make_graphed_callables(module, sample_args, **kwargs):
        def graphed(x):
            calls.append("graphed")
            return x
        module.forward = graphed
        return module
    return make_graphed_callables


class _Recorder(torch.nn.Module):
    def __init__(self, calls):
        super().__init__()
        self.calls = calls

    def forward(self, x):
        self.calls.append("eager")
        return x


def test_a_loop_counted_by_backward_calls_pairs_with_whole_steps_in_each_window(tmp_path):
    """A hand-written update (no optimizer): backward n + 1 ends step n, after forward n + 1 ran.
    Timed paired with a graphed model, the step is counted at the model's next call instead,
    before it picks its mode, so each window holds its own forwards and their backwards:
    graphed steps of 1 ms (0.5 forward, 0.5 backward) and eager ones of 3 ms give 3.0 exactly.
    Counted at the backward, every window would hold one backward of the other mode."""
    clock, calls = _Clock(), []
    stand_in = _stand_in_torch(clock, _switchable_graphs(calls))
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, count="backward")
    timer = StepTimer(settings, str(tmp_path / "result.json"), stand_in)
    assert timer._pairs()
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer._wrap_backward()
    timer._toggle_graphed_callables()
    model = stand_in.cuda.make_graphed_callables(_Recorder(calls), (torch.ones(1),))
    counted = []
    for _ in range(settings.warmup + settings.iterations + 2):
        model(torch.ones(1))
        counted.append(timer.m.steps)
        cost = 0.5 if calls[-1] == "graphed" else 1.5
        clock.now += cost                       # the forward
        stand_in.autograd.backward()
        clock.now += cost                       # its backward, in the forward's mode
    assert timer.m.paired and timer.m.complete
    assert timer.m.window_ms == [1.0, 1.0] and timer.m.eager_window_ms == [3.0, 3.0]
    assert timer.m.paired_speedup == pytest.approx(3.0)
    assert counted[:5] == [0, 1, 2, 3, 4]       # forward n + 1 counts step n, whose update is done: the check's snapshot


def test_an_iteration_that_backs_two_losses_pairs_whole_iterations(tmp_path):
    """Two backward passes an iteration, one through the graphed model (a GAN updated by hand:
    the discriminator's loss, then the generator's), two steps an iteration as the eager process
    counts them, after a warm-up of 3: a window edge at an odd step would fall between the two
    backward passes. Counted at the next call that records gradients, every window holds whole
    iterations of its own mode: 1.25 ms an iteration graphed, 3.25 eager, 2.6x."""
    clock, calls = _Clock(), []
    stand_in = _stand_in_torch(clock, _switchable_graphs(calls))
    settings = Settings(warmup=3, iterations=40, repeats=2, check_steps=3, paired=True, count="backward")
    timer = StepTimer(settings, str(tmp_path / "result.json"), stand_in)
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer._wrap_backward()
    timer._toggle_graphed_callables()
    model = stand_in.cuda.make_graphed_callables(_Recorder(calls), (torch.ones(1),))
    for _ in range(3 + 40 + 4):
        model(torch.ones(1))
        cost = 0.5 if calls[-1] == "graphed" else 1.5
        clock.now += cost                        # the generator's forward
        stand_in.autograd.backward()
        clock.now += 0.25                        # the discriminator's backward, not through the graph
        stand_in.autograd.backward()
        clock.now += cost                        # the generator's, in its forward's mode
    assert timer.m.paired and timer.m.complete
    assert timer.m.window_ms == [0.625, 0.625] and timer.m.eager_window_ms == [1.625, 1.625]
    assert timer.m.paired_speedup == pytest.approx(2.6)


def test_an_iteration_of_two_forwards_and_backwards_is_one_step_where_discovery_counted_two(tmp_path):
    """Two losses an iteration, each through the graphed model and backed before the next
    forward (a Siamese pair updated by hand): with ``backward_calls=2`` the second forward, after
    the first backward, counts no step, so no window edge falls inside an iteration and the
    steps are iterations, as a full-iteration graph's replays are: 2 ms an iteration graphed,
    6 ms eager, 3.0x. Counted one a backward (the count before), half of the windows' steps
    would be iterations cut in two."""
    clock, calls = _Clock(), []
    stand_in = _stand_in_torch(clock, _switchable_graphs(calls))
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, count="backward", backward_calls=2)
    timer = StepTimer(settings, str(tmp_path / "result.json"), stand_in)
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer._wrap_backward()
    timer._toggle_graphed_callables()
    model = stand_in.cuda.make_graphed_callables(_Recorder(calls), (torch.ones(1),))
    modes = []
    for _ in range(2 + 40 + 2):
        for _ in range(2):
            model(torch.ones(1))
            cost = 0.5 if calls[-1] == "graphed" else 1.5
            clock.now += cost                    # the forward
            stand_in.autograd.backward()
            clock.now += cost                    # its backward
        modes.append(calls[-2:])
    assert all(a == b for a, b in modes)         # both forwards of an iteration in one mode
    assert timer.m.paired and timer.m.complete
    assert timer.m.window_ms == [2.0, 2.0] and timer.m.eager_window_ms == [6.0, 6.0]
    assert timer.m.paired_speedup == pytest.approx(3.0)


def test_a_loop_counted_by_backward_calls_steps_once_an_iteration_unpaired(tmp_path):
    """The eager process (unpaired): with two backward() calls an iteration, iteration n is
    complete when iteration n + 1's first backward starts; its second ends nothing."""
    stand_in = _stand_in_torch(_Clock())
    settings = Settings(warmup=100, count="backward", backward_calls=2)
    timer = StepTimer(settings, str(tmp_path / "result.json"), stand_in)
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer._wrap_backward()
    counted = []
    for _ in range(5):
        for _ in range(2):
            stand_in.autograd.backward()
            counted.append(timer.m.steps)
    assert counted == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_steps_are_counted_at_the_next_graphed_call_that_records_gradients(tmp_path):
    """Backward() calls with no call of the graphed model between them (two losses backed, a
    model called elsewhere) leave their steps due; a no_grad call (a metric before the update)
    counts none, the next call that records gradients counts them all, before picking its mode:
    the steps counted stay one a backward and no window edge falls between two backward passes."""
    calls = []
    stand_in = _stand_in_torch(_Clock(), _switchable_graphs(calls))
    timer = StepTimer(Settings(warmup=100, paired=True, count="backward"), str(tmp_path / "result.json"), stand_in)
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer._wrap_backward()
    timer._toggle_graphed_callables()
    model = stand_in.cuda.make_graphed_callables(_Recorder(calls), (torch.ones(1),))
    for _ in range(4):
        stand_in.autograd.backward()
    assert timer.m.steps == 0 and timer.step_due
    with torch.no_grad():
        model(torch.ones(1))
    assert timer.m.steps == 0 and timer.step_due
    model(torch.ones(1))
    assert timer.m.steps == 4 and not timer.step_due
    for _ in range(12):                                  # no graphed call for that long: counted at the backward
        stand_in.autograd.backward()
    assert timer.m.steps == 16 - 8 and timer.step_due


def test_an_eager_window_step_of_a_hand_update_helper_counts_once_when_it_returns(tmp_path, monkeypatch):
    """A full_iteration patch of a loop without an optimizer: in an eager window the helper's
    step runs eagerly, backward() included; that backward ends no step, the call's return
    does (as a replay's does), so a window holds whole steps of one mode."""
    monkeypatch.setattr(torch.autograd, "backward", torch.autograd.backward)   # put back after the test
    clock = _Clock()
    stand_in = _stand_in_torch(clock, autograd=torch.autograd)
    timer = StepTimer(Settings(warmup=100, paired=True, count="backward"), str(tmp_path / "result.json"), stand_in)
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer._wrap_backward()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)

    def step(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.1)
        return loss
    helper = _full_iteration_helper_class()(step, [], [model])
    helper.graph = "captured"
    timer.backwards = 3                        # as after the script's first steps
    timer._toggle_full_iteration(types.SimpleNamespace(f_locals={"self": helper}))
    timer.eager_window = True
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    for n in range(1, 4):
        helper(x, y)
        assert timer.m.steps == n and not timer.step_due


def test_the_report_of_a_paired_row_that_failed_its_check_prints_no_speedup():
    """A paired row whose parameters then differed from eager's has no speedup: the report
    says so in its table and prints no paired note (it formatted the missing speedup)."""
    import io

    from rich.console import Console

    from advisor.report import render_tune
    from tuner.tune import result_table_rows, run_spreads

    row = {"scope": "fwd_bwd", "status": "mismatch", "ms_per_iter": 1.0, "speedup": None, "recovered": None,
           "peak_mb": None, "correct": False, "failure": {"kind": "mismatch", "message": "differs"},
           "measured_ms": 0.9, "paired_speedup": 1.4, "paired_eager_ms": 1.3, "run_ms": None, "note": ""}
    saved = {"winner": "eager", "script": "train.py", "eager_ms": 1.5, "eager_run_ms": None, "runs": 1,
             "rows": [row], "note": "", "step": {}, "eager_peak_mb": None, "gpu_busy_ms": None}
    out = io.StringIO()
    render_tune(saved, result_table_rows(saved), run_spreads(saved), Console(file=out, width=200))
    assert "MISMATCH" in out.getvalue() and "timed paired" not in out.getvalue()


def _full_iteration_helper_class():
    """The helper class a full_iteration patch adds to the user's script (tuner/templates.py)."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    return namespace["_CgFullIterationGraph"]


def _mlp_step(seed=0, width=4, device="cpu", make_optimizer=lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)):
    """(model, optimizer, step): a training step as a full_iteration patch makes it a function."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.ReLU(), torch.nn.Linear(2 * width, 1))
    model = model.to(device)
    optimizer = make_optimizer(model.parameters())

    def step(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss
    return model, optimizer, step


def test_a_full_iteration_helpers_eager_call_is_the_scripts_own_step():
    """An eager window's step of a full_iteration patch: the script's zero_grad (to None, so
    backward writes fresh gradients as the unpatched loop's does), then the step on this
    batch; the graph's gradient tensors go back to the parameters at the next graphed call,
    and an optimizer stepped after the helper reads the eager gradients until then."""
    from tuner.harness import eager_call, give_back_grads

    x, y = torch.randn(16, 4), torch.randn(16, 1)
    model, optimizer, step = _mlp_step()
    helper = _full_iteration_helper_class()(step, [optimizer], [model])
    graph_buffers = [torch.full_like(p, 7.0) for p in model.parameters()]   # what a replay writes
    for p, buffer in zip(model.parameters(), graph_buffers):
        p.grad = buffer
    plain, plain_optimizer, plain_step = _mlp_step()
    for _ in range(3):
        loss = eager_call(helper, (x, y))
        plain_optimizer.zero_grad(set_to_none=True)
        plain_loss = plain_step(x, y)
        assert torch.equal(loss, plain_loss)
        for p, q, buffer in zip(model.parameters(), plain.parameters(), graph_buffers):
            assert torch.equal(p, q) and torch.equal(p.grad, q.grad) and p.grad is not buffer
    give_back_grads(helper)
    assert all(p.grad is buffer for p, buffer in zip(model.parameters(), graph_buffers))
    give_back_grads(helper)                                    # a graphed call without eager ones: nothing
    assert all(p.grad is buffer for p, buffer in zip(model.parameters(), graph_buffers))


def test_an_eager_windows_step_gives_the_script_its_outputs_detached():
    """The script keeps what an eager window's step returns: detached, it holds no autograd
    graph whose gradient accumulators (made on the default stream) a capture in the next
    graphed window would reach. The values and the structure are the step's own."""
    from tuner.harness import eager_call

    x, y = torch.randn(16, 4), torch.randn(16, 1)
    model, optimizer, step = _mlp_step()

    def step_with_outputs(x, y):
        loss = step(x, y)
        return loss, {"prediction": model(x), "batch": len(x)}, [loss * 2]

    helper = _full_iteration_helper_class()(step_with_outputs, [optimizer], [model])
    loss, extra, doubled = eager_call(helper, (x, y))
    assert loss.grad_fn is None and not loss.requires_grad
    assert extra["prediction"].grad_fn is None and extra["batch"] == 16
    assert torch.equal(doubled[0], loss * 2)
    plain, _, plain_step = _mlp_step()
    assert torch.equal(loss, plain_step(x, y))   # the step ran as the script's own
    assert eager_call(helper, (x, y))[0].shape == ()


def test_detached_rebuilds_each_kind_of_output_or_leaves_it_as_it_is():
    import collections
    import dataclasses

    from tuner.harness import detached

    w = torch.ones(2, requires_grad=True)
    t = w * 2
    Pair = collections.namedtuple("Pair", "loss count")
    counts = collections.defaultdict(list, {"loss": t})
    out = detached((Pair(t, 3), counts, torch.max(t, 0), [t, None, "tag"], torch.Size([2])))
    pair, counts_out, maximum, listed, size = out
    assert type(pair) is Pair and pair.count == 3 and pair.loss.grad_fn is None
    assert type(counts_out) is collections.defaultdict and counts_out.default_factory is list
    assert counts_out["loss"].grad_fn is None and counts["loss"].grad_fn is not None   # the step's own dict untouched
    assert type(maximum) is type(torch.max(t, 0)) and maximum.values.grad_fn is None
    assert listed[1:] == [None, "tag"] and listed[0].grad_fn is None and size == torch.Size([2])
    assert detached(None) is None and detached(7) == 7

    @dataclasses.dataclass
    class Output:
        loss: torch.Tensor

    kept = Output(t)
    assert detached(kept) is kept   # an object of its own: as the step returned it


def test_a_capturable_optimizer_steps_as_built_in_an_eager_window():
    """For an eager window the optimizers a full_iteration patch made capturable step as the
    script built them (capturable Adam computes its bias corrections on the GPU, which the
    user's eager loop never does); after it they are capturable again. Fused groups and
    groups never capturable are left alone."""
    from tuner.harness import optimizers_as_built, optimizers_capturable

    params = [torch.nn.Parameter(torch.ones(2)) for _ in range(3)]
    adam = torch.optim.AdamW([{"params": params[:1]}, {"params": params[1:2], "capturable": False}])
    adam.param_groups[0]["capturable"] = True                  # as the patch or the helper made it
    sgd = torch.optim.SGD(params[2:], lr=0.1)
    changed = optimizers_as_built([adam, sgd, adam])
    assert [g["capturable"] for g in adam.param_groups] == [False, False] and len(changed) == 1
    assert "capturable" not in sgd.param_groups[0] or not sgd.param_groups[0]["capturable"]
    optimizers_capturable(changed)
    assert [g["capturable"] for g in adam.param_groups] == [True, False] and changed == []


def test_an_optimizer_stepped_after_the_replay_is_left_as_built_in_both_windows():
    """A helper whose graph leaves the optimizer step out (optimizers_in_graph=False: a
    scheduler, a GradScaler) never made it capturable, so an eager window has nothing to put
    back: a script's own capturable=True Adam stays capturable in both kinds of window, as in
    the user's eager run. A helper whose graph holds the step hands its optimizers over."""
    from tuner.harness import graphed_optimizers, optimizers_as_built

    helper_class = _full_iteration_helper_class()
    model, optimizer, step = _mlp_step()
    optimizer.param_groups[0]["capturable"] = True   # as the script built it
    outside = helper_class(step, [optimizer], [model], optimizers_in_graph=False)
    assert graphed_optimizers(outside) == [] and optimizers_as_built(graphed_optimizers(outside)) == []
    assert optimizer.param_groups[0]["capturable"] is True
    assert graphed_optimizers(helper_class(step, [optimizer], [model])) == [optimizer]


def test_the_eager_windows_of_a_full_iteration_helper_run_its_step_eagerly(tmp_path):
    """The harness finds the patch's helper as the caller of the first graph replay and wraps
    its class: a captured helper's call in an eager window runs eager_call; the helper counts
    as a toggled graph (pairing done); a class of another name is left alone."""
    helper_class = _full_iteration_helper_class()
    model, optimizer, step = _mlp_step()
    helper = helper_class(step, [optimizer], [model])
    helper.graph = "captured"                                  # what __call__'s first call leaves
    timer = StepTimer(Settings(paired=True), str(tmp_path / "result.json"), _stand_in_torch(_Clock()))
    other = types.SimpleNamespace(f_locals={"self": object()})
    timer._toggle_full_iteration(other)
    assert timer.helper_classes == set()
    timer._toggle_full_iteration(types.SimpleNamespace(f_locals={"self": helper}))
    assert timer.helper_classes == {helper_class}
    timer.eager_window = True
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    plain, plain_optimizer, plain_step = _mlp_step()
    assert torch.equal(helper(x, y), plain_step(x, y)) and timer.m.toggled == 1
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), plain.parameters()))


@requires_cuda
@pytest.mark.parametrize("optimizer_class", [torch.optim.AdamW, torch.optim.NAdam, torch.optim.SGD])
def test_on_the_gpu_eager_windows_of_a_capturable_optimizer_train_as_the_graph_does(optimizer_class):
    """A full-iteration graph of an AdamW (NAdam, SGD) step, then eager windows as tune's
    harness runs them (non-capturable, step counters on the CPU), then the graph again: the
    parameters follow a never-graphed copy to rounding, so an eager window neither loses nor
    repeats a step, and the graph reads the counters the eager steps moved."""
    from tuner.harness import eager_call, give_back_grads, optimizers_as_built, optimizers_capturable

    def adamw_step():
        return _mlp_step(width=32, device="cuda", make_optimizer=lambda p: optimizer_class(p, lr=1e-2))

    x, y = torch.randn(64, 32, device="cuda"), torch.randn(64, 1, device="cuda")
    model, optimizer, step = adamw_step()
    helper = _full_iteration_helper_class()(step, [optimizer], [model])
    plain, plain_optimizer, plain_step = adamw_step()
    for mode in ("graph", "eager", "graph", "eager", "graph"):
        changed = optimizers_as_built([optimizer]) if mode == "eager" and helper.graph is not None else []
        for _ in range(3):
            if mode == "eager":
                eager_call(helper, (x, y))
            else:
                give_back_grads(helper)
                helper(x, y)
            plain_optimizer.zero_grad(set_to_none=True)
            plain_step(x, y)
        optimizers_capturable(changed)
    torch.cuda.synchronize()
    for p, q in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    if optimizer_class is not torch.optim.SGD:
        assert optimizer.state[next(model.parameters())]["step"].is_cuda


@requires_cuda
def test_on_the_gpu_a_capture_after_an_eager_window_that_trained_unfrozen_parameters():
    """The fine-tuning loop under tune: the graph captured with the first layer frozen, the layer
    unfrozen, an eager window's steps (the script keeps the loss they return), then a graphed
    call, which captures again with the layer trained. Its capture must not meet the gradient
    accumulators the eager steps made for the layer on the default stream (tune's full_iteration
    of tests/corpus/finetune_unfreeze.py: capture-invalidated on the H200); the parameters then
    follow a never-graphed copy."""
    from tuner.harness import eager_call, give_back_grads

    x, y = torch.randn(64, 32, device="cuda"), torch.randn(64, 1, device="cuda")
    model, optimizer, step = _mlp_step(width=32, device="cuda")
    helper = _full_iteration_helper_class()(step, [optimizer], [model])
    plain, plain_optimizer, plain_step = _mlp_step(width=32, device="cuda")
    for layer in (model[0], plain[0]):
        layer.requires_grad_(False)

    def plain_steps(n):
        for _ in range(n):
            plain_optimizer.zero_grad(set_to_none=True)
            plain_step(x, y)

    for _ in range(3):
        loss = helper(x, y)
    plain_steps(3)
    for layer in (model[0], plain[0]):
        layer.requires_grad_(True)
    for _ in range(3):
        loss = eager_call(helper, (x, y))
    plain_steps(3)
    give_back_grads(helper)
    for _ in range(3):
        loss = helper(x, y)
    plain_steps(3)
    torch.cuda.synchronize()
    assert helper.trained == [True] * 4   # captured again, the first layer trained
    assert loss.isfinite()
    for p, q in zip(model.parameters(), plain.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_optimizers_switch_at_window_edges_outside_the_timed_windows(tmp_path, monkeypatch):
    """With a full-iteration helper, the optimizers step as built in each eager window and
    capturable again after it; the switch (a copy a step counter) falls between the ending
    window's mark and the next one's, so a slow one is timed in neither. Steps of eager
    windows are counted apart: no replay is due for them."""
    import tuner.harness as harness

    clock, switches = _Clock(), []

    def as_built(optimizers):
        clock.now += 100.0                                     # a slow switch: must not be timed
        switches.append(("as built", list(optimizers)))
        return ["changed"]

    def capturable(changed):
        clock.now += 100.0
        switches.append(("capturable", list(changed)))
        changed.clear()

    monkeypatch.setattr(harness, "optimizers_as_built", as_built)
    monkeypatch.setattr(harness, "optimizers_capturable", capturable)

    class Helper:
        optimizers = ["adam"]

    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True)
    timer = StepTimer(settings, str(tmp_path / "result.json"), _stand_in_torch(clock))
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    helper = Helper()
    timer.helpers[id(helper)] = helper
    timer.m.toggled, timer.look_for_helper = 1, True
    for _ in range(settings.warmup + settings.iterations):
        clock.now += 3.0 if timer.eager_window else 1.0
        timer._step()
    assert not timer.look_for_helper                             # no frame read on the timed replays
    assert switches == [("as built", ["adam"]), ("capturable", ["changed"])] * 2
    assert timer.m.window_ms == [1.0, 1.0] and timer.m.eager_window_ms == [3.0, 3.0]
    assert timer.m.eager_steps == 20 and timer.as_built == []


def _timed_paired(settings, steps, tmp_path, seconds_per_step=0.0, graphed_ms=lambda timed: 1.0, toggled=1):
    """A paired StepTimer stepped ``steps`` times past its warm-up on the stand-in clock:
    ``graphed_ms(steps timed before it)`` a graphed step (1 ms), 3 ms an eager one; each step also waits
    ``seconds_per_step`` on the host clock, which min_seconds reads."""
    import time

    clock = _Clock()
    timer = StepTimer(settings, str(tmp_path / "result.json"), _stand_in_torch(clock))
    timer._first_step_hook = types.SimpleNamespace(remove=lambda: None)
    timer.m.toggled = toggled
    for _ in range(settings.warmup + steps):
        clock.now += 3.0 if timer.eager_window else graphed_ms(timer.m.steps - settings.warmup)
        time.sleep(seconds_per_step)
        timer._step()
    return timer


def test_paired_windows_go_on_past_the_minimum_in_pairs_until_min_seconds(tmp_path):
    """Past --iterations the windows alternate on, graphed then eager, while the script runs
    and less than min_seconds are timed; the timing ends at an edge where every eager window
    has its graphed one, and the rest of the run is graphed. Those windows are long: a graphed
    one lasts ``paired_window_ms`` (50 ms: 50 steps of 1 ms), and they alone are measured."""
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, min_seconds=0.6)
    timer = _timed_paired(settings, 800, tmp_path, seconds_per_step=0.002)
    assert timer.long_window == 50 and timer.long_past == 0
    pairs = len(timer.m.window_ms)
    assert pairs == len(timer.m.eager_window_ms) and pairs >= 2           # long pairs only: the minimum's left out
    assert timer.m.timed_steps == 40 + 100 * pairs < 800 and timer.timing_done
    assert set(timer.m.window_ms) == {1.0} and set(timer.m.eager_window_ms) == {3.0}
    assert timer.m.paired_speedup == 3.0 and not timer.eager_window
    assert timer.m.eager_steps == 20 + 50 * pairs                         # nothing eager after the timing
    saved = json.loads((tmp_path / "result.json").read_text())
    assert saved["complete"] and saved["timed_steps"] == timer.m.timed_steps


def test_past_the_minimum_only_the_long_paired_windows_are_measured(tmp_path):
    """Graphed steps that read 2 ms in the minimum's short windows (what 10-step windows by
    turns read on the H100: a graph's ms/iteration up to 1.58x its own replaying throughout)
    and 1 ms after: windows of 25 steps (50 ms at 2 ms) past it, and the measurement reads
    them alone."""
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, min_seconds=1e6)
    timer = _timed_paired(settings, 40 + 100 + 10, tmp_path, graphed_ms=lambda before: 2.0 if before < 40 else 1.0)
    timer._at_exit()
    assert timer.long_window == 25
    assert timer.m.window_ms == [1.0, 1.0] and timer.m.eager_window_ms == [3.0, 3.0]
    assert timer.m.paired_speedup == 3.0 and timer.m.ms_per_iter == 1.0 and timer.m.timed_steps == 140


def test_the_measurement_says_how_long_its_graphed_windows_were(tmp_path):
    """The steps of each measured graphed window, and whether they lasted under
    ``paired_window_ms``: the long windows past the minimum (50 steps of 1 ms) do not; a
    script that ends before two long pairs is measured in the minimum's windows of 10 steps
    (10 ms), which do; a step of 10 ms keeps windows of 10 steps (100 ms), which do not."""
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, min_seconds=1e6)
    long = _timed_paired(settings, 40 + 250, tmp_path)
    long._at_exit()
    short = _timed_paired(settings, 40 + 130, tmp_path)
    short._at_exit()
    slow = _timed_paired(settings, 40 + 20, tmp_path, graphed_ms=lambda before: 10.0)
    slow._at_exit()
    assert (long.m.window_steps, long.m.short_windows) == (50, False)
    assert (short.m.window_steps, short.m.short_windows) == (10, True)
    assert (slow.m.window_steps, slow.m.short_windows) == (10, False)
    saved = json.loads((tmp_path / "result.json").read_text())   # the last timer's file
    assert saved["window_steps"] == 10 and saved["short_windows"] is False


def test_a_script_too_short_for_long_windows_is_timed_in_one_pair_graphed_first():
    """tune.paired_settings: a script of 200 steps (its eager run counted them) ends before
    the long windows past the minimum pair up, so its graph scopes are timed in one pair, each
    window half the steps past the warm-up less a margin; a long script, one of unknown length,
    or one whose pair would be no longer than the minimum's windows keeps the minimum's."""
    from tuner.tune import paired_settings

    settings = Settings(warmup=10, iterations=100, repeats=5)
    one_pair = paired_settings(settings, 200)
    assert (one_pair.paired, one_pair.iterations, one_pair.repeats, one_pair.warmup) == (True, 180, 1, 10)
    assert one_pair.stretch_steps == 10
    for steps in (None, 3000, 30):
        kept = paired_settings(settings, steps)
        assert (kept.paired, kept.iterations, kept.repeats, kept.stretch_steps) == (True, 100, 5, 0), steps


def test_the_long_windows_are_sized_from_the_predicted_graphed_step():
    """A script of 1000 steps: a graph predicted at 1 ms a step (windows of 50 ms sized for half
    that: 100 steps) gets two long pairs after the minimum and keeps them; at 0.05 ms (500
    steps) it would not, and is timed in one pair, as without a prediction; at 20 ms the
    minimum's windows of 10 steps already last 50 ms and stay."""
    from tuner.tune import paired_settings

    settings = Settings(warmup=10, iterations=100, repeats=5)
    assert paired_settings(settings, 1000, graphed_ms=1.0).repeats == 5
    assert paired_settings(settings, 1000, graphed_ms=0.05).repeats == 1
    assert paired_settings(settings, 1000).repeats == 1
    assert paired_settings(settings, 1000, graphed_ms=20.0).repeats == 5


def test_a_lone_graphed_window_is_not_short(tmp_path):
    """Timed in one pair (paired_settings), the graphed window ran before any eager one: it
    reads the graph as the loop does, so the measurement does not call it short, though it
    lasted under ``paired_window_ms`` (94 steps of 0.1 ms); eager over graphed is the speedup."""
    from tuner.tune import paired_settings

    settings = paired_settings(Settings(warmup=2, iterations=40, repeats=2, min_seconds=1e6), 200)
    timer = _timed_paired(settings, 198, tmp_path, graphed_ms=lambda before: 0.1)
    timer._at_exit()
    assert timer.m.window_ms == pytest.approx([0.1]) and timer.m.eager_window_ms == pytest.approx([3.0])
    assert timer.m.paired_speedup == pytest.approx(30.0)
    assert (timer.m.window_steps, timer.m.short_windows) == (94, False)


def test_one_pair_is_read_in_stretches_that_leave_the_loops_periodic_work_out(tmp_path):
    """Timed in one pair (paired_settings: stretches of the minimum's 10 steps), a graphed
    window that holds an evaluation (one step of 50 ms among steps of 1 ms) still reads 1 ms a
    step, the median of its stretches; the same pair timed whole reads it 1.5 ms."""
    from tuner.tune import paired_settings

    settings = paired_settings(Settings(warmup=2, iterations=40, repeats=2, min_seconds=1e6), 200)
    assert settings.stretch_steps == 10

    def with_an_evaluation(before):
        return 50.0 if before == 40 else 1.0

    stretched = _timed_paired(settings, 198, tmp_path, graphed_ms=with_an_evaluation)
    stretched._at_exit()
    whole = _timed_paired(replace(settings, stretch_steps=0), 198, tmp_path, graphed_ms=with_an_evaluation)
    whole._at_exit()
    assert stretched.m.window_ms == pytest.approx([1.0]) and stretched.m.paired_speedup == pytest.approx(3.0)
    assert whole.m.window_ms == pytest.approx([(93 + 50) / 94])
    assert (stretched.m.window_steps, stretched.m.short_windows) == (94, False)
    # stretches of 10 steps from each window's start, the last of a window taking in its 4 left
    assert [timed for timed, *_ in stretched.stretches] == [*range(0, 90, 10), *range(94, 184, 10), 188]
    # the one ratio's spread: each stretch against the other side's median (the evaluation's too)
    assert len(stretched.m.paired_ratios) == 18 and min(stretched.m.paired_ratios) < 1 < 3.0 == max(stretched.m.paired_ratios)


def test_stretches_are_not_read_where_nothing_was_paired(tmp_path):
    """No graph with an eager path ran (nothing toggled): the windows are the candidate's own,
    timed against the eager process, and are read whole, as that process's are."""
    from tuner.tune import paired_settings

    settings = paired_settings(Settings(warmup=2, iterations=40, repeats=2, min_seconds=1e6), 200)
    timer = _timed_paired(settings, 198, tmp_path, graphed_ms=lambda before: 50.0 if before == 40 else 1.0, toggled=0)
    timer._at_exit()
    assert not timer.m.paired and timer.m.window_ms == pytest.approx([(93 + 50) / 94, 3.0])


def test_tune_notes_a_speedup_timed_in_short_windows(tmp_path, monkeypatch):
    """A candidate whose paired timing stayed in short windows says so beside its speedup, and
    keeps the windows' steps in its result; one timed in long windows says nothing of them."""
    from tuner import runner

    def launch(data):
        def fake(command, env, timeout, launcher, stale):
            stale()
            Path(command[-2]).write_text(json.dumps(data))   # the harness's result file
            return "", 0
        return fake

    script = tmp_path / "loop.py"
    script.write_text("pass\n")
    measured = {"complete": True, "paired": True, "ms_per_iter": 1.0, "steps": 60, "window_ms": [1.0, 1.0],
                "paired_speedup": 3.0, "paired_ratios": [3.0], "eager_window_ms": [3.0]}
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True)
    notes = {}
    for short in (True, False):
        monkeypatch.setattr(runner, "_launch", launch({**measured, "window_steps": 10, "short_windows": short}))
        candidate, _ = runner.run_candidate(script, [], "eager", settings, tmp_path, 60, target=script)
        assert candidate.status == "ok" and candidate.window_steps == 10
        notes[short] = candidate.note
    assert "windows of 10 steps" in notes[True] and "likely low" in notes[True] and notes[False] == ""
    # one pair (a short script): said so, with the windows' steps and how to steady it
    monkeypatch.setattr(runner, "_launch", launch({**measured, "window_ms": [1.0], "window_steps": 90}))
    candidate, _ = runner.run_candidate(script, [], "eager", replace(settings, stretch_steps=10), tmp_path, 60,
                                        target=script)
    assert candidate.note == runner.ONE_PAIR_NOTE.format(90) and "one pair of 90-step windows" in candidate.note


def test_a_minimum_that_ends_before_an_eager_window_lengthens_one_edge_later(tmp_path):
    """--iterations 45 in windows of 11: the minimum ends with a window of one step, graphed,
    so the next is an eager one; the long windows start after it, at an edge where a graphed
    one does, and every window holds one mode."""
    settings = Settings(warmup=2, iterations=45, repeats=2, paired=True, min_seconds=1e6)
    timer = _timed_paired(settings, 45 + 11 + 200 + 5, tmp_path)
    timer._at_exit()
    assert timer.long_window == 50 and timer.long_past == 11
    assert timer.m.window_ms == [1.0, 1.0] and timer.m.eager_window_ms == [3.0, 3.0]
    assert timer.m.timed_steps == 45 + 11 + 200


def test_a_step_whose_short_windows_last_long_enough_keeps_them(tmp_path):
    """A graphed step of 10 ms: the minimum's windows of 10 steps last 100 ms, longer than
    ``paired_window_ms``; they stay, and so does every window after them."""
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, min_seconds=1e6)
    timer = _timed_paired(settings, 40 + 20, tmp_path, graphed_ms=lambda before: 10.0)
    timer._at_exit()
    assert timer.long_window is None and timer.long_from is None
    assert timer.m.window_ms == [10.0] * 3 and len(timer.m.paired_ratios) == 5


@pytest.mark.parametrize("iterations, repeats, graphed_ms, window", [(100, 5, 0.01, 500), (40, 1, 0.01, 490),
                                                                     (4, 2, 0.1, 49)])
def test_long_paired_windows_are_capped(tmp_path, iterations, repeats, graphed_ms, window):
    """A graphed step of 0.01 ms would want 5000 steps a window: 500 (MAX_PAIRED_WINDOW), and
    fewer where two pairs would not fit under the MAX_TIMED_FACTOR cap (--iterations 40: 490;
    4: 49, and the timing ends at 200 timed steps, the cap)."""
    settings = Settings(warmup=4, iterations=iterations, repeats=repeats, paired=True, min_seconds=1e6)
    timer = _timed_paired(settings, iterations * 60, tmp_path, graphed_ms=lambda before: graphed_ms)
    assert timer.long_window == window
    if iterations == 4:
        assert timer.timing_done and timer.m.timed_steps == 200


def test_paired_windows_stay_as_they_are_with_paired_window_ms_zero(tmp_path):
    """``paired_window_ms`` 0: the windows past the minimum keep its size (the bench that
    compares window sizes times them so)."""
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, min_seconds=1e6, paired_window_ms=0)
    timer = _timed_paired(settings, 40 + 40, tmp_path)
    timer._at_exit()
    assert timer.long_window is None and timer.m.window_ms == [1.0] * 4 and timer.m.timed_steps == 80


def test_a_script_that_ends_while_more_windows_are_timed_keeps_the_pairs_it_made(tmp_path):
    """min_seconds not reached: the script's end takes in every whole pair of long windows
    timed past the minimum (an unpaired graphed window at the end is left out); where it ends
    before two long pairs are whole, the minimum's windows stand."""
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, min_seconds=1e6)
    timer = _timed_paired(settings, 40 + 250, tmp_path)                  # two long pairs, and 50 steps of a third
    assert len(timer.m.window_ms) == 2 and not timer.timing_done          # measured at the minimum
    timer._at_exit()
    assert timer.m.window_ms == [1.0] * 2 and timer.m.eager_window_ms == [3.0] * 2
    assert timer.m.timed_steps == 240
    assert json.loads((tmp_path / "result.json").read_text())["timed_steps"] == 240
    short = _timed_paired(settings, 40 + 130, tmp_path)                  # one long pair, and 30 steps
    short._at_exit()
    assert short.m.window_ms == [1.0] * 2 and short.m.eager_window_ms == [3.0] * 2 and short.m.timed_steps == 40


def test_one_timed_step_paired_is_one_graphed_window(tmp_path):
    """--iterations 1: the minimum's one window is all there is, graphed; the script's end keeps it."""
    settings = Settings(warmup=2, iterations=1, repeats=1, paired=True, min_seconds=1e6)
    timer = _timed_paired(settings, 1, tmp_path)
    timer._at_exit()
    assert timer.m.complete and timer.m.window_ms == [1.0] and timer.m.ms_per_iter == 1.0


@pytest.mark.parametrize("min_seconds, world_size", [(0.0, "1"), (1e6, "2")])
def test_min_seconds_zero_or_ranks_under_torchrun_time_exactly_the_minimum(tmp_path, monkeypatch, min_seconds,
                                                                           world_size):
    """Under torchrun each rank would read its own clock and their windows part ways: every
    rank stops at --iterations, whatever min_seconds says."""
    monkeypatch.setenv("WORLD_SIZE", world_size)
    settings = Settings(warmup=2, iterations=40, repeats=2, paired=True, min_seconds=min_seconds)
    timer = _timed_paired(settings, 100, tmp_path)
    assert timer.m.window_ms == [1.0, 1.0] and timer.m.eager_window_ms == [3.0, 3.0]
    assert timer.m.timed_steps == 40 and timer.timing_done and timer.m.eager_steps == 20


def test_the_report_says_where_a_paired_row_is_held_at_the_gpu_busy_time():
    import io

    from rich.console import Console

    from advisor.report import render_tune
    from tuner.tune import result_table_rows, run_spreads

    row = {"scope": "full_iteration", "status": "ok", "ms_per_iter": 0.14, "speedup": 1.5 / 0.14, "recovered": None,
           "peak_mb": None, "correct": True, "failure": None, "measured_ms": 0.15, "paired_speedup": 15.0,
           "paired_eager_ms": 2.2, "run_ms": None, "note": ""}
    saved = {"winner": "full_iteration", "script": "train.py", "eager_ms": 1.5, "eager_run_ms": None, "runs": 1,
             "rows": [row], "note": "", "step": {}, "eager_peak_mb": None, "gpu_busy_ms": 0.14}
    out = io.StringIO()
    render_tune(saved, result_table_rows(saved), run_spreads(saved), Console(file=out, width=400))
    assert "between runs" not in out.getvalue() and "median" not in out.getvalue()
    gain = 15.0 / eager_slowdown("full_iteration")
    assert f"{gain:.2f}x with graphing's slowdown" in out.getvalue()
    assert "held at the iteration's GPU-busy time (0.140 ms" in out.getvalue()


def test_a_helper_first_called_in_an_eager_window_captures_with_capturable_optimizers(tmp_path, monkeypatch):
    """A loop in a function makes a new helper each call: one whose first call (its capture)
    falls in an eager window captures the optimizers capturable, as its replays will run them
    (its graph would otherwise hold step counters that the window's end puts aside), and the
    window goes on with them as built, the new helper's own included."""
    import tuner.harness as harness

    switches = []
    monkeypatch.setattr(harness, "optimizers_capturable", lambda changed: switches.append(("capturable", changed)))
    monkeypatch.setattr(harness, "optimizers_as_built",
                        lambda optimizers: switches.append(("as built", optimizers)) or ["changed again"])
    helper_class = _full_iteration_helper_class()
    model, optimizer, step = _mlp_step()
    timer = StepTimer(Settings(paired=True), str(tmp_path / "result.json"), _stand_in_torch(_Clock()))
    timer._toggle_full_iteration(types.SimpleNamespace(f_locals={"self": helper_class(step, [optimizer], [model])}))
    timer.eager_window, timer.as_built = True, ["changed"]
    new = helper_class(step, [optimizer], [model])               # graph None: its first call captures
    new(torch.randn(16, 4), torch.randn(16, 1))                  # (on the CPU its fallback runs the step)
    assert switches == [("capturable", ["changed"]), ("as built", [optimizer])]
    assert timer.as_built == ["changed again"]


def test_the_spread_line_names_each_scopes_processes_where_they_differ():
    """A scope timed in one pair runs in three processes while eager ran in one (tune.runs_for):
    the spread line and the table's title say so per scope, not as --runs for all."""
    import io

    from rich.console import Console

    from advisor.report import render_tune
    from tuner.tune import result_table_rows, run_spreads

    def row(scope, runs):
        return {"scope": scope, "status": "ok", "ms_per_iter": 0.1, "speedup": 10.0, "recovered": None,
                "peak_mb": None, "correct": True, "failure": None, "measured_ms": None, "paired_speedup": None,
                "paired_eager_ms": None, "run_ms": [0.1] * len(runs), "paired_runs": runs, "note": ""}

    saved = {"winner": "full_iteration", "script": "train.py", "eager_ms": 1.0, "eager_run_ms": [1.0, 1.1],
             "runs": 1, "rows": [row("full_iteration", [8.0, 10.0, 12.0]), row("fwd_bwd", [1.5, 1.8, 1.6])],
             "note": "", "step": {}, "eager_peak_mb": None, "gpu_busy_ms": None}
    assert run_spreads(saved) == {"eager": (1.1 / 1.0, 2), "full_iteration": (1.5, 3), "fwd_bwd": (1.2, 3)}
    out = io.StringIO()
    render_tune(saved, result_table_rows(saved), run_spreads(saved), Console(file=out, width=400))
    text = out.getvalue()
    assert ("between runs (slowest/fastest of its processes): eager 1.10x (2), full_iteration 1.50x (3), "
            "fwd_bwd 1.20x (3); timings closer than that are within this machine's noise") in text
    assert "where a scope ran in several processes their median" in " ".join(text.split())
    saved = {**saved, "eager_run_ms": [1.0, 1.2, 1.1]}
    out = io.StringIO()
    render_tune(saved, result_table_rows(saved), run_spreads(saved), Console(file=out, width=400))
    assert "between runs (slowest/fastest of 3 processes): eager 1.20x, full_iteration 1.50x, fwd_bwd 1.20x;" in out.getvalue()
