"""Runs one candidate script and measures it from the inside, without editing it further.

``python -m tuner.harness RESULT.json script.py [args...]`` runs the script as ``__main__``
with a fixed seed and counts its training steps: optimizer steps taken on the default stream
outside any capture (warm-up on a side stream and the step inside a capture are not training
steps), and replays of graphs once an optimizer step has been captured (the ``full_iteration``
scope; with the optimizer kept eager, its own steps count). For an inference loop a step is
a call of the model: the first module called at the top level, counted by a forward hook on it.
After ``check_steps`` steps it saves the parameters, or the outputs of an inference loop (the
correctness check against eager); over steps ``warmup`` to
``warmup + iterations`` it times the iterations (CUDA events, else the CPU clock) and writes
RESULT.json; then, while the script runs, more windows of that size until ``min_seconds`` are
timed (a host's launch speed drifts from second to second), and RESULT.json again. With
``to_end`` (tune's default) it lets the script run on to its own end, so that code after the
loop (a final print, a ``return loss``, a checkpoint) runs too and a patch that breaks it fails
here, not at the end of the user's long run; without, it stops the script where the timing ends.

Under torchrun each worker runs the harness: ``{rank}`` in RESULT.json and in the snapshot's
path becomes the worker's RANK, so that every rank writes its own measurement and parameters
(the runner takes the slowest rank's time and compares every rank's parameters with eager's).
"""

from __future__ import annotations

import atexit
import functools
import json
import linecache
import math
import os
import statistics
import sys
import threading
import time
import weakref
from dataclasses import asdict, dataclass, field
from typing import Optional

ENV = "CG_TUNE_SETTINGS"
TIMING_DONE = "cg-advise harness: timing done, running the script to its end"


@dataclass
class Settings:
    kind: str = "train"         # or "inference": steps are calls of the model
    count: str = "optimizer"    # "backward": a hand-written update, no optimizer; a step is backward_calls backward() calls
    backward_calls: int = 1     # count "backward": the backward() calls one iteration makes (StepSpec.backwards)
    warmup: int = 10
    iterations: int = 100      # timed steps, in `repeats` equal windows: ms/iteration is their median
    repeats: int = 5
    min_seconds: float = 3.0   # then more windows while the script runs (paired: longer ones), until this much is timed
    check_steps: int = 5
    seed: int = 0
    snapshot: str = ""          # where the parameters after check_steps go (torch.save)
    script_dir: str = ""        # the original script's folder, first on sys.path
    gpu_warmup_s: float = 0.3   # GPU work before the script, so that every candidate starts at full clocks
    cpus: list = field(default_factory=list)   # pin the process to these CPUs (same cores for every candidate)
    to_end: bool = True         # after timing, let the script finish (its code after the loop runs too)
    paired: bool = False        # graphs with an eager path: alternate graphed and eager windows in this process
    capturable: bool = False    # torch.optim's optimizers built capturable (eager as a full-iteration graph steps them)
    paired_window_ms: float = 50.0   # paired, past the minimum: a graphed window lasts this long (0: windows stay)
    stretch_steps: int = 0      # paired, up to the minimum: each window timed in stretches of this many steps,
                                # their median its ms/iteration (one long pair: tune.paired_settings)


def step_counting(step: dict) -> dict:
    """How tune counts a training step of the StepSpec ``step`` (as a dict), as Settings'
    ``count`` and ``backward_calls``: its optimizer's steps, or, where a hand-written update has
    no optimizer, the backward() calls an iteration makes (1 where that number varies)."""
    by_backward = step.get("kind", "train") == "train" and not step.get("optimizer")
    return {"count": "backward" if by_backward else "optimizer", "backward_calls": step.get("backwards") or 1}


@dataclass
class Measurement:
    steps: int = 0
    ms_per_iter: Optional[float] = None
    window_ms: list = field(default_factory=list)   # ms/iteration of each timed window
    peak_mb: Optional[float] = None
    snapshot: Optional[str] = None
    complete: bool = False
    timed_steps: int = 0        # steps timed: --iterations, more while the script ran on (min_seconds); paired with
                                # long windows, the minimum's too, which the measurement then leaves out
    note: str = ""
    timer: str = ""
    stochastic: bool = False    # dropout active, or a graph whose replay draws random numbers (a VAE's noise): others than eager's
    graph_replays: int = 0      # CUDA graph replays seen: none means a graph scope fell back to eager
    rank: int = 0               # torchrun's RANK of this worker (0 in a single process)
    world_size: int = 1
    eager_window_ms: list = field(default_factory=list)   # paired: the eager windows between the graphed ones
    paired_ratios: list = field(default_factory=list)   # paired: each eager window over its graphed neighbours
    paired_speedup: Optional[float] = None   # paired: the median of paired_ratios
    toggled: int = 0            # paired: graphed callables and full-iteration helpers that can run eagerly
    paired: bool = False        # the timed steps alternated graphed and eager windows
    eager_steps: int = 0        # paired: steps that ran in eager windows (no graph replayed for them)
    unpaired_why: str = ""      # pairing asked for but not done: why
    window_steps: int = 0       # paired: steps in each measured graphed window (the median)
    short_windows: bool = False   # paired: those windows lasted under paired_window_ms, the script too
                                  # short for longer ones (_lengthen_windows): they read a graph slow


class StepTimer:
    def __init__(self, settings: Settings, result_path: str, torch_module):
        self.settings, self.result_path, self.torch = settings, result_path, torch_module
        self.cuda = torch_module.cuda.is_available()
        self.m = Measurement(timer="cuda events" if self.cuda else "cpu clock", rank=rank(),
                             world_size=int(os.environ.get("WORLD_SIZE", "1")))
        self.params = {}        # id -> parameter, in the order the optimizers first stepped them
        self.marks = []         # CUDA events or perf_counter readings at window edges (kept out of asdict)
        self.timing_began = 0.0     # host clock at the first timed step
        self.timing_done = False    # the last window is timed: no more edges
        self._lock = threading.RLock()   # edges (main thread) and the watchdog's stop (without to_end)
        self.step_captured = False
        self.counted = None     # id of the optimizer whose steps count iterations
        self._counted_ref = None    # a weak reference to it: gone, the next optimizer to step counts
        self.backwards = 0          # without an optimizer: backward() calls of the loop (default stream, no capture)
        self.step_due = False       # paired, without an optimizer: steps are complete, counted at the next switched call
        self.switched = False       # paired: a graphed callable or compiled model runs through _switch
        self.in_eager_call = False  # paired, without an optimizer: a full-iteration helper's step runs eagerly
        self.outputs = []       # inference: the first check_steps outputs, on the CPU
        self.depth = 0
        self.eager_window = False   # paired: the graphs run their eager path now
        self.helper_classes = set()  # paired: full-iteration helpers whose calls can run the step eagerly
        self.look_for_helper = False  # paired: read each replay's caller for a full-iteration helper (until found)
        self.helpers = weakref.WeakValueDictionary()   # paired: id -> each live helper that was called
        self.as_built = []          # paired: in an eager window, the optimizer state made non-capturable
        self.pairing = self._pairs()   # fixed by the settings and the device: read on every step
        self.long_window = None     # paired, past the minimum: steps a window (_lengthen_windows)
        self.long_from = None       # paired: the mark they start at
        self.lengthen_declined = False   # paired: the windows stay as they are (_lengthen_windows)
        self.stretches = []         # paired, stretch_steps: (timed, end mark, start mark, eager) where each stretch ends

    def install(self) -> "StepTimer":
        torch = self.torch
        from torch.optim import optimizer as optim

        from torch.nn.modules import module

        self._first_step_hook = module.register_module_forward_pre_hook(self._before_first_step)
        if self.settings.kind == "inference":
            self._global = [module.register_module_forward_pre_hook(self._enter),
                            module.register_module_forward_hook(self._leave)]
        elif self.settings.count == "backward":
            self._wrap_backward()
        else:
            self._hook = optim.register_optimizer_step_post_hook(self._after_optimizer_step)
        if self.pairing:
            self._toggle_graphed_callables()
            self._toggle_compiled()
            self.look_for_helper = True
        elif self.settings.paired:
            self.m.unpaired_why = self._why_unpaired()
        graph_class = getattr(torch.cuda, "CUDAGraph", None)
        if graph_class is not None:
            original = graph_class.replay

            def replay(graph):
                if self.look_for_helper:   # until found, before timing: a frame read on every replay would be timed
                    self._toggle_full_iteration(sys._getframe(1))
                # the first replays, before timing: a graph that draws random numbers (dropout, a
                # VAE's torch.randn_like, a diffusion step's noise) moves the CUDA generator's
                # offset at each replay; eager drew others, so its parameters differ from eager's
                before = torch.cuda.get_rng_state() if self.m.graph_replays < RNG_CHECKED_REPLAYS else None
                out = original(graph)
                if before is not None and not torch.equal(torch.cuda.get_rng_state(), before):
                    self.m.stochastic = True
                self.m.graph_replays += 1
                if self.step_captured:
                    self._step()
                return out

            graph_class.replay = replay
        atexit.register(self._at_exit)
        return self

    def _toggle_graphed_callables(self) -> None:
        """Paired timing: whatever ``torch.cuda.make_graphed_callables`` graphs (a module's
        forward, a function) can run as it was before for the eager windows, so that eager and
        graphed are timed in the same process, a window apart. Timed in separate processes, as
        tune times eager and a full-iteration graph, a host-bound loop moved 2x from process to
        process on the lent H200 (0.36-0.73 ms) while the two alternating in one process stayed
        within 4 % of each other (bench/paired_windows_probe.py)."""
        torch, timer, switch = self.torch, self, self._switch
        original = torch.cuda.make_graphed_callables

        def make_graphed_callables(callables, *args, **kwargs):
            single = not isinstance(callables, tuple)
            items = (callables,) if single else callables
            eager = [c.forward if isinstance(c, torch.nn.Module) else c for c in items]
            made = original(callables, *args, **kwargs)
            timer._switch_patch_holder(sys._getframe(1))
            result = []
            for item, before, graphed in zip(items, eager, (made,) if single else made):
                if isinstance(item, torch.nn.Module):
                    item.forward = switch(item.forward, before)
                    result.append(item)
                else:
                    result.append(switch(graphed, before))
                timer.m.toggled += 1
            return result[0] if single else tuple(result)

        torch.cuda.make_graphed_callables = make_graphed_callables
        graphs = getattr(torch.cuda, "graphs", None)
        if getattr(graphs, "make_graphed_callables", None) is original:   # the same function, its module's name
            graphs.make_graphed_callables = make_graphed_callables

    def _switch_patch_holder(self, caller) -> None:
        """Paired timing of a patch's graphed module (tuner/templates.py ``_cg_graph_forward``,
        the caller of ``make_graphed_callables`` at its capture): the eager windows call the
        module's own forward, as the user's eager loop does, not the patch's forward around it.
        That forward reads each call's structure, shapes, layer modes and parameter addresses
        before it picks the graph or eager, host work a graphed step pays and an eager step of
        the user's loop does not; run in the eager windows it made them slower than tune's eager
        process by 1.25x (median) over the H200 tunes of steps under 1.2 ms, and tiny steps'
        fwd_bwd speedups read 1.16x their speedup over that process (bench/unseen_eval.py), where
        graphing alone slowed a tiny model's own eager step by 1.02-1.06x (bench/eager_slowdown_probe.py).
        Through the module's own forward, eight loops tuned on the lent H200 read fwd_bwd's eager
        windows 1.09x that process, and a tiny step's speedup what the profile predicted
        (counter_in_step 0.71x against 0.72x, 0.93x before; bench/results/paired_timing/
        h200_own_forward_2026-12-02). The holder (``_CgForward``) is switched once; a capture
        again keeps the switch."""
        if caller is None or caller.f_code.co_name != "forward":
            return
        module, eager_forward = caller.f_locals.get("module"), caller.f_locals.get("eager_forward")
        holder = vars(module).get("forward") if isinstance(module, self.torch.nn.Module) else None
        if type(holder).__name__ != HOLDER_CLASS or eager_forward is None or getattr(holder, SWITCHED, False):
            return
        holder.run = self._switch(holder.run, eager_forward)
        setattr(holder, SWITCHED, True)

    def _switch(self, graphed, eager):
        """A callable that runs ``eager`` in the eager windows and ``graphed`` in the others. In a
        loop counted by backward() calls, the steps due are counted at the next call that records
        gradients, before it picks its mode (``_loop_backward``)."""
        self.switched = True

        @functools.wraps(graphed)
        def forward(*args, **kwargs):
            if self.step_due and not self._capturing() and self.torch.is_grad_enabled():
                self.step_due = False
                while self.m.steps < self.backwards // self._per_step():
                    self._step()
            return (eager if self.eager_window else graphed)(*args, **kwargs)
        return forward

    def _toggle_compiled(self) -> None:
        """Paired timing of the compile scope: the patch's compiled alias of a model (a
        ``torch.compile`` call on a line marked COMPILE_MARK) runs the model uncompiled for the
        eager windows; what the script compiles itself stays compiled, as in the eager process.
        A compiled module's instance ``forward`` (dynamo's frame) is switched, so the alias keeps
        its type, its hooks and its ``_orig_mod``; the eager path calls the module as the user's
        loop does. Compiling does not slow the module's own eager steps (0.98-1.00x a
        never-compiled copy's, bench/paired_windows_probe.py contamination-compile)."""
        torch, timer, switch = self.torch, self, self._switch
        original = getattr(torch, "compile", None)
        if original is None:   # torch before 2.0
            return

        def compile(model=None, *args, **kwargs):
            compiled = original(model, *args, **kwargs)
            caller = sys._getframe(1)
            if COMPILE_MARK not in linecache.getline(caller.f_code.co_filename, caller.f_lineno):
                return compiled   # the script's own compile (a loss, a decorator): compiled in both processes
            if model is None or not callable(model) or compiled is model:
                return compiled
            if isinstance(model, torch.nn.Module):
                if not isinstance(compiled, torch.nn.Module) or "forward" not in vars(compiled):
                    return compiled
                compiled.forward = switch(compiled.forward, model.__call__)
            else:
                compiled = switch(compiled, model)
            timer.m.toggled += 1
            return compiled

        torch.compile = compile

    def _toggle_full_iteration(self, caller) -> None:
        """Paired timing of a full-iteration graph: the patch's helper (``_CgFullIterationGraph``,
        found as the caller of a replay before timing starts) runs the captured step eagerly for
        the eager windows, through ``eager_call``. Its class is wrapped, not the instance, so that
        every helper of the script switches (a loop in a function makes one per call)."""
        helper = caller.f_locals.get("self") if caller is not None else None
        cls = type(helper)
        if cls.__name__ != FULL_ITERATION_HELPER or cls in self.helper_classes:
            return
        self.helper_classes.add(cls)
        self.look_for_helper = False
        timer, original = self, cls.__call__

        def __call__(helper, *inputs):
            if getattr(helper, "allreduce", None) is not None:   # DDP's all-reduce beside the graph: not paired
                return original(helper, *inputs)
            if helper.graph is None:
                return timer._capture(helper, original, inputs)
            if id(helper) not in timer.helpers:
                timer.helpers[id(helper)] = helper
                timer.m.toggled = max(timer.m.toggled, 1)
            if timer.eager_window:
                return timer._eager_step(helper, inputs)
            give_back_grads(helper)
            return original(helper, *inputs)

        cls.__call__ = __call__

    def _capture(self, helper, original, inputs):
        """A helper's first call captures its graph (a loop in a function makes a new helper
        each call). In an eager window the optimizers are capturable again for it, as its graph
        will run them, and as built again after, its own included."""
        if not (self.eager_window and self.as_built):
            return original(helper, *inputs)
        optimizers_capturable(self.as_built)
        try:
            return original(helper, *inputs)
        finally:
            self.as_built = optimizers_as_built(graphed_optimizers(helper) + self._helper_optimizers())

    def _eager_step(self, helper, inputs):
        """An eager window's call of a full-iteration helper. Without an optimizer, the step is
        counted when the call returns, as a replay's is, not at the backward() inside it: a
        window then holds whole steps of one mode."""
        if self.settings.count != "backward":
            return eager_call(helper, inputs)   # its optimizer's step hook counts it
        self.in_eager_call = True
        try:
            out = eager_call(helper, inputs)
        finally:
            self.in_eager_call = False
        self._step()
        return out

    def _helper_optimizers(self) -> list:
        return [o for h in list(self.helpers.values()) for o in graphed_optimizers(h)]

    def _pairs(self) -> bool:
        """Whether the timed steps alternate graphed and eager windows: asked for, on a GPU, in
        a training loop, and with every step up to the correctness snapshot before the first
        eager window (a short script's fitted window of 2 steps after a warm-up of 2 would
        check a step that ran eagerly). A loop counted by backward() calls pairs too: its
        windows change mode where a step starts, not at the backward that ends the one before
        (``_loop_backward``, ``_eager_step``)."""
        s = self.settings
        window = max(1, s.iterations // max(1, 2 * s.repeats))
        return s.paired and self.cuda and s.kind == "train" and s.warmup + window >= s.check_steps

    def _why_unpaired(self) -> str:
        s = self.settings
        if not self.cuda:
            return "no CUDA device"
        if s.kind != "train":
            return "an inference loop"
        return f"the correctness check at step {s.check_steps} would fall in an eager window: too few steps"

    def _before_first_step(self, module, args) -> None:
        """Until the first step: is a dropout module active (stochastic training)? Without an
        optimizer, the modules called are where the parameters are (in call order: the same
        order whatever the scope, since the model is called before its graphed children)."""
        if self.settings.count == "backward":
            for p in module.parameters():
                self.params.setdefault(id(p), p)
        if module.training and random_in_training(self.torch, module):
            self.m.stochastic = True

    # -- inference: until the first top-level module call ends, global hooks find the model;
    # then one forward hook on it (global hooks would slow every module call)
    def _enter(self, module, args) -> None:
        self.depth += 1

    def _leave(self, module, args, output) -> None:
        self.depth -= 1
        if self.depth == 0:
            for handle in self._global:
                handle.remove()
            module.register_forward_hook(self._after_model_call)
            self._after_model_call(module, args, output)

    def _capturing(self) -> bool:
        return self.cuda and self.torch.cuda.is_current_stream_capturing()

    def _on_side_stream(self) -> bool:
        """Warm-up before a capture runs on a side stream: not a step of the user's loop."""
        return self.cuda and self.torch.cuda.current_stream() != self.torch.cuda.default_stream()

    def _after_model_call(self, module, args, output) -> None:
        if self._capturing() or self._on_side_stream():
            return
        if self.m.steps < self.settings.check_steps:
            self.outputs += [t.detach().float().cpu() for t in _tensors(output)]
        self._step()

    def _wrap_backward(self) -> None:
        """A loop without an optimizer (``p.data.add_(p.grad, alpha=-lr)``): the first backward()
        of each iteration after the first ends a step (an iteration makes ``backward_calls``); the
        snapshot holds the parameters of the modules called before."""
        autograd = self.torch.autograd
        original = autograd.backward

        def backward(*args, **kwargs):
            # the update of step n follows its backward: step n is complete when step n + 1's
            # first backward starts (the first step's completes nothing), as a replay completes its step
            if self._capturing() or self._on_side_stream():
                self._after_update()
            elif not self.in_eager_call:
                self._loop_backward()
            return original(*args, **kwargs)

        autograd.backward = backward

    def _loop_backward(self) -> None:
        """Backward n of a loop without an optimizer (one an iteration, say; an iteration that
        backs k losses counts a step every k). Plainly counted, it ends step n - 1, whose
        update ran since backward n - 1. Timed paired with graphed callables (or a compiled
        model), forward n has already run in the mode of the window that would end here;
        instead, steps are due, and the next switched call that records gradients (forward
        n + 1; not a no_grad call before the update) counts every step up to n before it picks
        its mode, so that a window holds its own forwards and their backwards, also where an
        iteration backs two losses. Only where calls stay away for PENDING_BACKWARDS backward
        passes are the steps counted here."""
        self.backwards += 1
        if not (self.pairing and self.switched):
            if self.backwards > 1 and (self.backwards - 1) % self._per_step() == 0:
                self._step()
            return
        while self.m.steps < (self.backwards - PENDING_BACKWARDS) // self._per_step():
            self._step()
        self.step_due = True

    def _per_step(self) -> int:
        """backward() calls a step makes: an iteration that backs two losses is one step, as
        a full-iteration graph's replay is."""
        return max(1, self.settings.backward_calls)

    def _after_optimizer_step(self, optimizer, args, kwargs) -> None:
        if self.m.steps < self.settings.check_steps:  # only the snapshot needs them: not in the timed steps
            for group in optimizer.param_groups:
                for p in group["params"]:
                    self.params.setdefault(id(p), p)
        # a GAN steps two optimizers an iteration: the first one to step counts the iterations;
        # where that one is gone (a loop that builds its optimizer again each epoch), the next
        # one to step takes over, so that the steps go on being counted
        if self.counted is None or self._counted_is_gone():
            self.counted = id(optimizer)
            try:
                self._counted_ref = weakref.ref(optimizer)
            except TypeError:   # an optimizer that takes no weak reference: counted by id alone
                self._counted_ref = None
        if id(optimizer) == self.counted:
            self._after_update()

    def _counted_is_gone(self) -> bool:
        return self._counted_ref is not None and self._counted_ref() is None

    def _after_update(self) -> None:
        if self._capturing():
            self.step_captured = True
        elif not self._on_side_stream():
            self._step()

    def _mark(self):
        if self.cuda:
            event = self.torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _step(self) -> None:
        if self.m.steps == 0:
            self._first_step_hook.remove()  # global hooks slow every module call
        self.m.steps += 1
        self.m.eager_steps += self.eager_window   # this step ran in an eager window: no replay is due for it
        s, n = self.settings, self.m.steps
        if n == s.check_steps and s.snapshot:
            saved = self.outputs if s.kind == "inference" else [p.detach().cpu() for p in self.params.values()]
            self.torch.save(saved, s.snapshot)
            self.m.snapshot = s.snapshot
        paired = self.pairing
        window = max(1, s.iterations // max(1, s.repeats * (2 if paired else 1)))
        timed = n - s.warmup
        if timed == 0:
            self.look_for_helper = False   # a helper's first replays come before timing; after, a frame read would be timed
            self.timing_began = time.perf_counter()
            if self.cuda:
                self.torch.cuda.reset_peak_memory_stats()
        if timed < 0 or self.timing_done:
            return
        # window edges: every `window` steps up to the minimum (and at it), then every `window`
        # steps past it while more windows are timed (paired: every `long_window` from where
        # those start)
        past = timed - s.iterations
        if self.long_window is not None and past > self.long_past:   # every step: the marks read only past the minimum
            edge = (past - self.long_past) % self.long_window == 0
        else:
            edge = timed % window == 0 or past == 0 if past <= 0 else past % window == 0
        if not edge:
            if s.stretch_steps and paired and past < 0 and self._stretch_ends(timed, window):
                mark = self._mark()
                self.stretches.append((timed, mark, mark, self.eager_window))
            return
        with self._lock:   # the watchdog's stop measures the same marks
            if not self.timing_done:
                self._edge(timed, past, window, paired)

    def _edge(self, timed: int, past: int, window: int, paired: bool) -> None:
        """A window edge: mark it, pick the next window's mode, and at the minimum and where
        the timing ends, measure and write."""
        s = self.settings
        if paired:   # each window starts on an idle GPU: none inherits the other's queued work
            self.torch.cuda.synchronize()
        if paired and timed == window:   # the scope's own peak: before an eager window adds its activations
            self.m.peak_mb = self.torch.cuda.max_memory_allocated() / 2**20
        # past the minimum, timing ends at an edge where the windows pair up (as many eager as
        # graphed) once min_seconds are timed; a window that starts at an odd edge is an eager one
        ends = past >= 0 and (not paired or len(self.marks) % 2 == 0) and self._timed_enough(timed)
        eager_window = paired and not ends and len(self.marks) % 2 == 1
        end = start = self._mark()
        if eager_window != self.eager_window and (self.helpers or self.as_built):
            # between the ending window's mark and the next one's: a copy a step counter, untimed
            if eager_window:
                self.as_built = optimizers_as_built(self._helper_optimizers())
            else:
                optimizers_capturable(self.as_built)
            start = self._mark()
        self.marks.append((timed, end, start))
        self.eager_window = eager_window
        if s.stretch_steps and paired and past <= 0:
            self.stretches.append((timed, end, start, eager_window))
        if past == 0 or ends:
            self._measure()
            self._publish(done=ends)
        if past >= 0 and not ends:
            self._lengthen_windows(window)
        if past == 0:
            print(TIMING_DONE, file=sys.stderr, flush=True)   # what fails after this failed after the timing
            if not ends:
                # the next window starts after the measuring and writing, which are not the loop's
                self.marks[-1] = (timed, end, self._mark())
                if not s.to_end:
                    self._start_watchdog()

    def _lengthen_windows(self, window: int) -> None:
        """Paired, past the minimum: windows long enough that each graphed one lasts about
        ``paired_window_ms`` (sized from the minimum's graphed windows). Windows of 10 steps by
        turns read a full-iteration graph's ms/iteration 1.13-1.58x what the same rewrite
        replaying throughout reads on the lent H100 (the DCGAN's 0.61-0.70 ms against 0.45; 20
        steps 1.24x, 100 steps 1.01x; bench/paired_vs_continuous.sh), the GPU's clock at its
        maximum all along: a user's loop replays throughout. Where the script runs on for two
        long pairs, those alone are measured (``_measure``); tune times a script too short for
        them in one pair (tune.paired_settings), and one of unknown length in the minimum's. A
        long window starts at an edge where a graphed one does: where the minimum ends before
        an eager window, one edge later. A step slow enough that the
        minimum's windows last that long already keeps them; the windows stay short enough that
        two pairs fit under the MAX_TIMED_FACTOR cap."""
        if self.long_window is not None or self.lengthen_declined or (len(self.marks) - 1) % 2:
            return
        target = self.settings.paired_window_ms
        if not (target > 0 and self.pairing and self.m.toggled and self.m.ms_per_iter):
            self.lengthen_declined = True
            return
        room = self.settings.iterations * (MAX_TIMED_FACTOR - 1) // 4
        wanted = min(math.ceil(target / self.m.ms_per_iter), MAX_PAIRED_WINDOW, room)
        if wanted <= window:
            self.lengthen_declined = True
            return
        self.long_window, self.long_from = wanted, len(self.marks) - 1

    @property
    def long_past(self) -> int:
        """Steps past the minimum where the long windows start (0 before they do)."""
        return self.marks[self.long_from][0] - self.settings.iterations if self.long_from is not None else 0

    def _publish(self, done: bool) -> None:
        """Writes the measurement; where the timing is ``done`` and the script is not to run on
        to its end, stops it there."""
        self.timing_done = done
        self.write()
        sys.stdout.flush()
        sys.stderr.flush()
        if done and not self.settings.to_end:
            os._exit(0)

    def _start_watchdog(self) -> None:
        """Without ``to_end`` the script is stopped where the timing ends; a script whose steps
        stop being counted (an optimizer built again each epoch, the first one counted) would
        reach no more edges and run to its end: past min_seconds and a grace, a timer thread
        takes in the windows timed so far and stops it."""
        left = self.settings.min_seconds - (time.perf_counter() - self.timing_began)
        timer = threading.Timer(max(left, 0.0) + WATCHDOG_GRACE_S, self._stop_now)
        timer.daemon = True
        timer.start()

    def _stop_now(self) -> None:
        with self._lock:
            if self.timing_done:
                return
            try:
                self._measure()
            except Exception:  # noqa: BLE001 - a device error: the minimum's figures stand
                pass
            self._publish(done=True)

    def _timed_enough(self, timed: int) -> bool:
        """Whether the windows so far span ``min_seconds`` (host clock), or as many steps as a
        cap allows. The lent H100's host launches at two speeds and the mix drifts from second
        to second: timed for 100 steps (0.2-0.7 s), processes of one script read up to 1.58x
        apart, for 2000 steps 1.07-1.18x (bench/results/timing_span_h100/). Under torchrun every
        rank stops at --iterations: each would read its own clock, and their windows (paired:
        their graphed and eager modes) would part ways."""
        s = self.settings
        return (self.m.world_size > 1 or time.perf_counter() - self.timing_began >= s.min_seconds
                or timed >= s.iterations * MAX_TIMED_FACTOR)

    def _measure(self) -> None:
        """ms/iteration (and, paired, the speedup) from the windows between the marks so far:
        at the minimum, again where the timing ends, and at the script's exit if it ends while
        more windows are timed (paired: up to the last eager window, so that each pairs up;
        with two pairs of long windows or more, those alone: ``_lengthen_windows``)."""
        marks = self.marks
        if self.long_from is not None:   # two long pairs at least, else the short windows before them
            marks = marks[self.long_from:] if len(marks) - self.long_from >= 5 else marks[:self.long_from + 1]
        if self.pairing and len(marks) % 2 == 0 and len(marks) > 2:
            marks = marks[:-1]   # (two marks: one window, all there is: --iterations 1)
        if len(marks) < 2:
            return
        if self.cuda:
            self.torch.cuda.synchronize()
            if self.m.peak_mb is None:
                self.m.peak_mb = self.torch.cuda.max_memory_allocated() / 2**20
        windows, steps = [], []
        for (a, _, start), (b, end, _) in zip(marks, marks[1:]):
            windows.append(self._elapsed_ms(start, end) / (b - a))
            steps.append(b - a)
        stretched = self._stretched() if len(windows) == 2 and self.stretches and self.m.toggled else None
        if stretched:   # one pair, timed in stretches
            windows = [statistics.median(stretched[False]), statistics.median(stretched[True])]
        if self.pairing and self.m.toggled:
            self.m.paired = True
            self.m.window_ms, self.m.eager_window_ms = windows[0::2], windows[1::2]
            self.m.paired_ratios = paired_ratios(windows)
            self.m.paired_speedup = statistics.median(self.m.paired_ratios) if self.m.paired_ratios else None
            if stretched:   # the one ratio's spread: each stretch against the other side's median
                self.m.paired_ratios = ([windows[1] / g for g in stretched[False] if g > 0]
                                        + [e / windows[0] for e in stretched[True]])
            self._window_length(steps[0::2])
        else:
            self.m.window_ms = windows
            if self.pairing:
                self.m.unpaired_why = ("no graph ran that has an eager path (torch.cuda.make_graphed_callables, "
                                       "torch.compile, or the full-iteration helper)")
        self.m.ms_per_iter = statistics.median(self.m.window_ms)
        self.m.timed_steps = marks[-1][0]
        self.m.complete = True

    def _stretch_ends(self, timed: int, window: int) -> bool:
        """Whether a stretch ends at ``timed``: every ``stretch_steps`` from its window's start,
        the last one of a window taking in the few steps left before the window's end, so that
        no stretch is a stub of a few steps."""
        into = timed - self.stretches[-1][0] if self.stretches else timed
        since_edge = timed - self.marks[-1][0]
        return into >= self.settings.stretch_steps and window - since_edge >= self.settings.stretch_steps

    def _elapsed_ms(self, start, end) -> float:
        return start.elapsed_time(end) if self.cuda else (end - start) * 1e3

    def _stretched(self) -> Optional[dict]:
        """{eager: ms/iteration of each stretch} of one pair of windows (tune.paired_settings),
        each window read as the median of its stretches of ``stretch_steps``: a loop's own
        periodic work (an evaluation each epoch, a DataLoader's workers started again) falls in
        one window of the pair and not the other, where the median of several windows leaves it
        out; timed whole, the word language model's graphed window of 90 steps (CG_STEPS=200,
        an evaluation every 40) read 0.725 ms a step on the H200 where 0.325 was predicted.
        None where a side has no stretch."""
        by_mode = {False: [], True: []}
        for (a, _, start, eager), (b, end, _, _) in zip(self.stretches, self.stretches[1:]):
            if b > a:
                by_mode[eager].append(self._elapsed_ms(start, end) / (b - a))
        return by_mode if by_mode[False] and by_mode[True] else None

    def _window_length(self, graphed_steps: list) -> None:
        """The measured graphed windows' steps, and whether they lasted under
        ``paired_window_ms``: a script too short for the long windows, timed in the minimum's
        windows of about 10 steps, reads a full-iteration graph 1.13-1.58x slower than the same
        rewrite replaying throughout on the lent H100 (bench/results/paired_windows_h100/), in
        every graphed window after an eager one: its speedup reads low. A lone graphed window
        (one pair, tune.paired_settings) ran before any eager one and reads as the loop does."""
        self.m.window_steps = int(statistics.median(graphed_steps))
        target = self.settings.paired_window_ms
        self.m.short_windows = bool(target > 0 and len(graphed_steps) > 1
                                    and self.m.window_steps * statistics.median(self.m.window_ms) < target)

    def _at_exit(self) -> None:
        """The script ended: where it did while more windows than the minimum were timed, the
        measurement takes them in."""
        if not self.timing_done and self.m.steps - self.settings.warmup >= self.settings.iterations:
            try:
                self._measure()
            except Exception:  # noqa: BLE001 - a device error at exit: the minimum's figures stand
                pass
        self.write()

    def write(self) -> None:
        if not self.m.complete:
            steps = "model calls" if self.settings.kind == "inference" else "training steps"
            self.m.note = (f"the script ended after {self.m.steps} {steps}; timing needs "
                           f"{self.settings.warmup + self.settings.iterations}")
        data = asdict(self.m)
        partial = f"{self.result_path}.partial"   # a process killed while writing leaves the last whole file
        with open(partial, "w") as handle:
            json.dump(data, handle)
        os.replace(partial, self.result_path)


WATCHDOG_GRACE_S = 2.0   # without to_end: past min_seconds, this long for the next edge before the watchdog stops the script
MAX_TIMED_FACTOR = 50   # timed steps stop at the first edge from this many times --iterations, whatever min_seconds says
PENDING_BACKWARDS = 8   # paired, without an optimizer: steps left for a switched call to count, at most
MAX_PAIRED_WINDOW = 500   # steps: a graphed step of 0.1 ms or less gets windows of this many
RNG_CHECKED_REPLAYS = 8   # replays read for random draws: a step's graphs (fwd_bwd's forward and backward, a GAN's several)
FULL_ITERATION_HELPER = "_CgFullIterationGraph"   # the class tuner/templates.py adds to a full_iteration patch
HOLDER_CLASS = "_CgForward"   # the forward tuner/templates.py sets on a module a fwd_bwd or submodule patch graphs
SWITCHED = "_cg_tune_switched"   # set on a patch's forward holder once its calls switch with the windows
COMPILE_MARK = "cg-advise: scope compile"           # the comment on the compile patch's torch.compile line
ON_CPU_UNLESS_CAPTURABLE = ("step", "mu_product")   # torch.optim's scalar state off the GPU when not capturable
GRAPH_GRADS = "_cg_tune_graph_grads"   # eager_call keeps the graph's gradient tensors on the helper here


def random_in_training(torch, module) -> bool:
    """Whether ``module`` draws random numbers when it trains: a dropout module, or an RNN
    (LSTM, GRU) with dropout between its layers. cuDNN draws an RNN's masks from a state of its
    own, not from the CUDA generator whose offset tune reads at each replay: without this,
    tune failed the LSTM and GRU loops of bench/workloads/unseen_2026-11-29 as different from
    eager (2.3e-3 against the 1e-3 tolerance) where a graph drew other masks than eager's."""
    if isinstance(module, torch.nn.modules.dropout._DropoutNd):
        return module.p > 0
    return isinstance(module, torch.nn.RNNBase) and module.dropout > 0 and module.num_layers > 1


def eager_call(helper, inputs: tuple):
    """One call of a full-iteration helper run as the user's unpatched loop runs it: its step
    (forward, loss, backward and the optimizer steps it holds) eagerly on this batch, after the
    script's zero_grad (set to None, as the rewrite moved that call into the helper), so that
    backward writes fresh gradients as eager's does instead of adding into the graph's (a kernel
    a parameter). An optimizer stepped after the helper (kept eager) reads these gradients; the
    graph's own tensors go back to the parameters at the next graphed call (give_back_grads). A
    helper of micro-steps adds into whatever gradients the script left, as its eager loop does;
    its next graphed call copies them into the graph's. The timer makes its optimizers
    non-capturable for the window (optimizers_as_built); what the eager windows still pay that
    the user's eager run does not is the slowdown that graphing lays on eager backward passes
    (tuner/search.py GRAPHED_EAGER_SLOWDOWN).

    The step's outputs come back detached: the script keeps them (``loss = step(x, y)``), and
    with them the eager step's autograd graph, whose gradient accumulators were made on the
    default stream. A capture in the graphed window after it (the helper captures again once
    parameters are unfrozen) then accumulates the newly trained parameters' gradients through
    those nodes, and the stream sync autograd adds between them and the capture stream breaks
    the capture: tune's full_iteration of tests/corpus/finetune_unfreeze.py failed so
    (capture-invalidated) on the H200 where the rewrite, run whole, printed eager's result. A
    replay returns the graph's outputs, whose accumulators are the capture's own."""
    # micro-steps: the graphed call attaches the graph's tensors again, with what eager left in them
    if not helper.accumulate:
        if GRAPH_GRADS not in vars(helper):   # since its capture, the tensors its replays write
            setattr(helper, GRAPH_GRADS, [(p, p.grad) for p in helper._params()])
        helper._zero_grad()
    return detached(helper.step(*inputs))


def detached(outputs):
    """``outputs`` with every tensor detached from its autograd graph, in tuples (named ones,
    ``torch.return_types``), lists and mappings (a ``defaultdict`` keeps its factory) rebuilt
    as they were. Never raises: a container that cannot be rebuilt so, or any other object
    (a dataclass), comes back as it is, as the step returned it."""
    import copy

    import torch

    if torch.is_tensor(outputs):
        return outputs.detach()
    try:
        if isinstance(outputs, (tuple, list)):
            items = [detached(item) for item in outputs]
            return type(outputs)(*items) if hasattr(outputs, "_fields") else type(outputs)(items)
        if isinstance(outputs, dict):
            rebuilt = copy.copy(outputs)
            for key, value in outputs.items():
                rebuilt[key] = detached(value)
            return rebuilt
    except Exception:  # noqa: BLE001 - a container of its own kind: the step's value stands
        pass
    return outputs


def build_capturable(torch) -> None:
    """Every torch.optim optimizer that takes ``capturable`` built with it on unless the script
    says otherwise: eager as a full-iteration graph of the optimizer step runs it (patch makes
    the script's optimizer capturable). The same update, other kernels and roundings: a graph
    matches this eager bit for bit where plain eager is 1e-3 apart after a few Adam steps."""
    import inspect

    for optimizer in vars(torch.optim).values():
        if not (isinstance(optimizer, type) and issubclass(optimizer, torch.optim.Optimizer)):
            continue
        if "capturable" not in inspect.signature(optimizer.__init__).parameters:
            continue

        def __init__(self, *args, _built=optimizer.__init__, **kwargs):
            kwargs.setdefault("capturable", True)
            _built(self, *args, **kwargs)

        optimizer.__init__ = __init__


def graphed_optimizers(helper) -> list:
    """The optimizers whose step a full-iteration helper's graph holds, which it made
    capturable; none where they step eagerly after each replay (``optimizers_in_graph=False``:
    left as the script built them, capturable or not, in both kinds of window)."""
    return list(helper.optimizers) if getattr(helper, "optimizers_in_graph", True) else []


def optimizers_as_built(optimizers: list) -> list:
    """For an eager window: the optimizers a full-iteration helper made capturable, as the user's
    script built them (not capturable). A capturable Adam's eager step computes its bias
    corrections on the GPU, a dozen more kernels a step: kept capturable, AdamW's eager steps
    read 1.17-1.32x a never-graphed copy's on the lent H100, as built 1.03-1.10x
    (bench/paired_windows_probe.py contamination-full). Each step counter moves to the CPU, where a non-capturable step reads
    it (NAdam its ``mu_product`` too); the GPU tensor the graph captured is kept. Fused
    optimizers keep theirs on the GPU, and so does ASGD, capturable or not."""
    import torch

    changed = []
    for optimizer in dict.fromkeys(optimizers):
        if type(optimizer).__name__ == "ASGD":
            continue
        for group in optimizer.param_groups:
            if not group.get("capturable") or group.get("fused"):
                continue
            group["capturable"] = False
            moved = []
            for p in group["params"]:
                state = optimizer.state.get(p) or {}
                for key in ON_CPU_UNLESS_CAPTURABLE:
                    if torch.is_tensor(state.get(key)) and state[key].is_cuda:
                        moved.append((state, key, state[key]))
                        state[key] = state[key].cpu()
            changed.append((group, moved))
    return changed


def optimizers_capturable(changed: list) -> None:
    """After an eager window: the optimizers capturable again, each step counter written back
    into the GPU tensor the graph reads."""
    for group, moved in changed:
        group["capturable"] = True
        for state, key, on_gpu in moved:
            on_gpu.copy_(state[key])
            state[key] = on_gpu
    changed.clear()


def give_back_grads(helper) -> None:
    """After eager calls, the graph's gradient tensors back on the parameters: its replay
    writes them, and an optimizer stepped after the helper reads them there."""
    for p, grad in vars(helper).pop(GRAPH_GRADS, ()):
        p.grad = grad


def paired_ratios(windows: list) -> list:
    """Eager over graphed from alternating windows (graphed first: graphed, eager, graphed,
    ...): each eager window over the graphed window before it and the one after, so that a
    host whose speed drifts across the run moves both sides of every ratio alike."""
    return [windows[k] / windows[j] for k in range(1, len(windows), 2)
            for j in (k - 1, k + 1) if j < len(windows) and windows[j] > 0]


def rank() -> int:
    """This worker's rank under torchrun (RANK), 0 in a single process."""
    return int(os.environ.get("RANK", "0"))


def per_rank(path: str) -> str:
    """``path`` with ``{rank}`` replaced by this worker's rank."""
    return path.replace("{rank}", str(rank()))


def _tensors(output) -> list:
    """The tensors in a model's output: a tensor, nested tuples, lists and dicts (ModelOutput)."""
    if hasattr(output, "detach") and hasattr(output, "shape"):
        return [output]
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        return [t for item in output for t in _tensors(item)]
    return []


def parse_cpus(text: str) -> list:
    """'0-3,8' -> [0, 1, 2, 3, 8]; '' -> []. ValueError for anything else."""
    cpus = []
    for part in text.split(",") if text else ():
        first, _, last = part.partition("-")
        cpus += range(int(first), int(last or first) + 1)
    return cpus


def spin_gpu(torch, seconds: float) -> None:
    """An idle GPU runs at low clocks; short, launch-bound loops would be timed before it speeds up.
    Under torchrun each worker spins its own GPU (LOCAL_RANK), and leaves the current device as
    it was: the script sets it."""
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    with torch.cuda.device(device):
        a = torch.randn(2048, 2048, device=device)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(8):
                a = torch.tanh(a @ a)
            torch.cuda.synchronize(device)
        del a
        torch.cuda.empty_cache()


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 2:
        print("usage: python -m tuner.harness RESULT.json script.py [args...]", file=sys.stderr)
        raise SystemExit(2)
    result_path, target = per_rank(argv[0]), argv[1:]
    settings = Settings(**json.loads(os.environ.get(ENV, "{}")))
    settings.snapshot = per_rank(settings.snapshot)
    if settings.cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, settings.cpus)
    import torch

    if settings.gpu_warmup_s and torch.cuda.is_available():
        spin_gpu(torch, settings.gpu_warmup_s)
    torch.manual_seed(settings.seed)
    if settings.capturable and torch.cuda.is_available():
        build_capturable(torch)
    StepTimer(settings, result_path, torch).install()
    if settings.script_dir:
        sys.path.insert(0, settings.script_dir)
    from advisor.inject import run_target

    run_target(target)


if __name__ == "__main__":
    main()
