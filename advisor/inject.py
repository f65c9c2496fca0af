"""NVTX ranges around a PyTorch script's iterations and submodules, without editing it.

Run as ``python -m advisor.inject script.py [args...]`` (or ``-m package [args...]``): the
script runs as ``__main__`` with its own ``sys.argv``, and PyTorch's global hooks mark

- one ``cg-advise:iteration`` range per training step, from the first top-level forward
  after the previous step to the end of this step, its (last) optimizer step (with several
  optimizers, the last of the order they step in: ``advisor.step_cycle``; a start/end range, so it
  also covers the backward kernels launched from autograd's own thread); in a loop that
  updates its parameters by hand, without an optimizer, up to the next step's first forward;
- one ``cg-advise:forward`` range per call of a top-level module (a module with
  parameters called outside any other module): the iteration of an inference loop;
- one ``cg-advise:module:<name>`` range per call of each child of that top-level module;
- one ``cg-advise:backward`` range per ``torch.autograd.backward`` call, one
  ``cg-advise:optimizer`` range per optimizer step and one ``cg-advise:zero_grad`` range per
  ``zero_grad`` call (of an optimizer or a module): the phases of the step, so that the
  analyser can tell the host time that a capture scope leaves eager.

With a window, the warm-up iterations run untraced: the second half of them is timed here
(CUDA events on the current stream, and the host clock), and as many iterations again after
the window, more until both stretches span ``CG_ADVISE_BASELINE_SECONDS`` (3 s; then the
script stops, unless it runs to its end), and the figures go into the
summary file as ``untraced``: the eager baseline every prediction is measured against, taken without
the tracer's own cost. The host time of the phases (top-level forward, backward, optimizer
step) in those iterations is timed too: the untraced split of the host time, which each
tracer inflates in its own way (bench/backends_compare.py sets it beside both traces' split).

Options come through the environment, so the script's own argv stays untouched:
``CG_ADVISE_WARMUP`` / ``CG_ADVISE_ITERATIONS`` bound a window (cudaProfilerStart/Stop
around iterations N..N+M), ``CG_ADVISE_RUN_TO_END=1`` lets the script run on after it,
``CG_ADVISE_SUMMARY`` names a JSON file that receives the counts at exit.
``CG_ADVISE_KINETO_TRACE=FILE`` records with ``torch.profiler`` instead of Nsight Systems:
the ranges become ``record_function`` ranges (emitted only while recording, so the untraced
baseline pays nothing for them) and the window's Chrome trace (Kineto JSON) goes to FILE.
"""

from __future__ import annotations

import json
import os
import runpy
import statistics
import sys
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import ranges
from .step_cycle import StepCycle


class NvtxSink:
    """Emits ranges through the ``nvtx`` package (attributes built once per name, strings
    registered), else through ``torch.cuda.nvtx``. With ``in_window_only`` (the injector sets
    ``active`` while its window records) a range is emitted only while recording, as the torch
    backend's sink does, so that the untraced baseline does not pay for ranges no one records;
    a range opened before the window closes as a no-op."""

    def __init__(self, in_window_only: bool = False) -> None:
        self.in_window_only = in_window_only
        self.active = not in_window_only
        self._emitted = []   # in_window_only: whether each open push was emitted
        self._attributes = {}
        try:
            import nvtx  # type: ignore

            self._domain = nvtx.get_domain()  # the default domain; a no-op one when no tool listens
        except ImportError:
            import torch.cuda.nvtx as tnvtx

            self._domain = None
            self.push, self.pop = tnvtx.range_push, tnvtx.range_pop
            self.start, self.end = tnvtx.range_start, tnvtx.range_end
        if in_window_only:   # the gate wraps whichever emitter was chosen
            self._emit_push, self._emit_pop, self._emit_start, self._emit_end = self.push, self.pop, self.start, self.end
            self.push, self.pop, self.start, self.end = self._gated_push, self._gated_pop, self._gated_start, self._gated_end

    def _attrs(self, name: str):
        attrs = self._attributes.get(name)
        if attrs is None:
            attrs = self._attributes[name] = self._domain.get_event_attributes(message=name)
        return attrs

    def push(self, name: str) -> None:
        self._domain.push_range(self._attrs(name))

    def pop(self) -> None:
        self._domain.pop_range()

    def start(self, name: str):
        return self._domain.start_range(self._attrs(name))

    def end(self, handle) -> None:
        self._domain.end_range(handle)

    def _gated_push(self, name: str) -> None:
        self._emitted.append(self.active)
        if self.active:
            self._emit_push(name)

    def _gated_pop(self) -> None:
        if self._emitted and self._emitted.pop():
            self._emit_pop()

    def _gated_start(self, name: str):
        return (self._emit_start(name),) if self.active else None

    def _gated_end(self, handle) -> None:
        if handle is not None:
            self._emit_end(handle[0])


class RecordFunctionSink:
    """Emits the ranges as ``torch.profiler`` ``record_function`` ranges, which the Kineto
    trace holds as ``user_annotation`` events; a no-op outside the recorded window (a range
    opened before the window starts closes as a no-op too)."""

    def __init__(self) -> None:
        from torch.autograd.profiler import record_function

        self._record_function = record_function
        self._open = []
        self.active = False

    def _enter(self, name: str):
        if not self.active:
            return None
        scope = self._record_function(name)
        scope.__enter__()
        return scope

    @staticmethod
    def _exit(scope) -> None:
        if scope is not None:
            scope.__exit__(None, None, None)

    def push(self, name: str) -> None:
        self._open.append(self._enter(name))

    def pop(self) -> None:
        if self._open:
            self._exit(self._open.pop())

    def start(self, name: str):
        return self._enter(name)

    def end(self, handle) -> None:
        self._exit(handle)


class KinetoRecorder:
    """The window's on_start/on_stop for the torch backend: ``torch.profiler`` with CPU and
    CUDA activities, no shapes, stacks or memory (the tracer's own cost stays low), its Chrome
    trace exported to ``path`` when the window closes (gzip when the name ends in .gz)."""

    def __init__(self, path: str, sink: RecordFunctionSink) -> None:
        self.path = path
        self.sink = sink
        self._profiler = None

    def start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
            torch.cuda.synchronize()
        self._profiler = profile(activities=activities, record_shapes=False, with_stack=False,
                                 profile_memory=False)
        self._profiler.start()
        self.sink.active = True

    def stop(self) -> None:
        import torch

        if self._profiler is None:
            return
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.sink.active = False
        profiler, self._profiler = self._profiler, None
        profiler.stop()
        profiler.export_chrome_trace(self.path)


@dataclass
class Window:
    """Iterations ``warmup .. warmup+iterations`` are recorded; None records all."""

    warmup: int = 0
    iterations: Optional[int] = None
    run_to_end: bool = True
    baseline_seconds: float = 0.0   # the untraced chunks go on after the window until they span this long
    baseline_before_seconds: float = 0.0   # the warm-up's timed half goes on, the window waiting, until it spans this long
    on_start: Callable[[], None] = lambda: None
    on_stop: Callable[[], None] = lambda: None
    on_exit: Callable[[], None] = lambda: None

    @property
    def bounded(self) -> bool:
        return self.iterations is not None


def _gradient_cleared(module) -> bool:
    """Whether the module's first trained parameter has no gradient (set to None since its
    backward); False for a module without one."""
    first = next((p for p in module.parameters() if p.requires_grad), None)
    return first is not None and first.grad is None


def _cuda_profiler_start() -> None:
    import torch

    torch.cuda.profiler.start()


def _cuda_profiler_stop() -> None:
    import torch

    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def _exit_now() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# the phases whose untraced host time the warm-up records (ms per iteration, median)
PHASES_TIMED = ("forward", "backward", "optimizer", "after_backward", "between", "zero_grad_between")


@dataclass
class Injector:
    """Global module and optimizer hooks that turn a script's calls into NVTX ranges."""

    sink: object
    window: Window = field(default_factory=Window)
    iterations_done: int = 0
    training_steps: int = 0
    inference_calls: int = 0
    module_ranges: int = 0
    graph_replays: int = 0
    steps_ended_at_next_forward: int = 0       # training steps of a loop without an optimizer (see _training_call_begins)
    trained_parameters: Optional[int] = None   # the top-level module's parameter tensors that train (at
                                               # its first training call; None in an inference loop)
    optimizers: list = field(default_factory=list)   # the first stepped optimizers (MAX_DESCRIBED), each
                                                     # described at its first step
    optimizers_stepped: int = 0                # distinct optimizers seen stepping
    made_capturable: dict = field(default_factory=dict)   # id -> elements of each distinct parameter tensor
                                                          # a full-iteration graph makes capturable
    recording: bool = False
    untraced: dict = field(default_factory=dict)   # the timed untraced iterations, see _untraced_figures
    _marks: list = field(default_factory=list)     # (host seconds, CUDA event) at timed iteration ends
    _timing: bool = False                          # inside a timed untraced chunk: the phases are timed too
    _untraced_chunks: list = field(default_factory=list)   # the timed warm-up, then as many iterations after the window
    _after_left: int = 0                           # untraced iterations still to time after the window
    _opened_at: Optional[int] = None               # the iterations run when the recording window opened
    _phase_open: dict = field(default_factory=dict)     # phase -> host seconds at its start
    _phase_seconds: dict = field(default_factory=dict)  # phase -> host seconds since the last mark
    _phase_marks: list = field(default_factory=list)    # _phase_seconds at each timed iteration end
    _depth: int = 0
    _pushed: list = field(default_factory=list)
    _iteration: object = None
    _backward_done: bool = False                   # a backward has run in the open iteration
    _optimizers_built: int = 0                     # optimizers constructed since install()
    _zeroed_since_backward: bool = False           # a zero_grad() (of a module or an optimizer) since the last backward
    _children: "weakref.WeakKeyDictionary" = field(default_factory=weakref.WeakKeyDictionary)
    _root: object = None
    _roots: list = field(default_factory=list)     # each top-level module seen before adoption: a weak reference
    _root_index: dict = field(default_factory=dict)   # id -> its index in _roots
    root_names: list = field(default_factory=list)   # each one's names in the script's frames (``model``, ``self.net``)
    _root_calls: dict = field(default_factory=dict)   # id -> top-level calls seen before adoption
    _children_pushed: list = field(default_factory=list)   # after adoption: whether each open child call pushed
    _trained_roots: set = field(default_factory=set)   # ids of the top-level modules called with grad in train mode
    _step_cycle: StepCycle = field(default_factory=StepCycle)   # which optimizer's step ends the training step
    input_layouts: dict = field(default_factory=dict)   # root index -> its training calls' input layouts (_count_layout)
    _handles: list = field(default_factory=list)
    _optimizers_seen: dict = field(default_factory=dict)   # id -> a callable giving the optimizer back:
                                                           # by identity (an optimizer may not hash)
    _unwraps: list = field(default_factory=list)

    def install(self) -> "Injector":
        import torch
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        self._torch = torch
        # each handle kept as it is made: remove() takes back what an install that failed half-way made
        self._handles = []
        for register in (lambda: nn_module.register_module_forward_pre_hook(self._before_forward),
                         lambda: _forward_hook_always_called(nn_module, self._after_forward),
                         lambda: optim.register_optimizer_step_pre_hook(self._before_step),
                         lambda: optim.register_optimizer_step_post_hook(self._after_step)):
            self._handles.append(register())
        self._wrap_graph_replay(getattr(torch.cuda, "CUDAGraph", None))
        self._wrap_backward(torch.autograd)
        self._wrap_zero_grad(optim.Optimizer)
        self._wrap_zero_grad(nn_module.Module)
        self._count_built_optimizers(optim.Optimizer)
        if self.window.bounded and self.window.warmup == 0:
            self._opened_at = 0
            self._begin_window()
        return self

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        while self._unwraps:
            self._unwraps.pop()()

    def _wrap_graph_replay(self, graph_class) -> None:
        """A replay outside any module and iteration is a whole captured iteration."""
        if graph_class is None or not hasattr(graph_class, "replay"):
            return
        original = graph_class.replay
        injector = self

        def replay(graph):
            if injector._depth or injector._iteration is not None:
                return original(graph)
            handle = injector.sink.start(ranges.ITERATION)
            try:
                return original(graph)
            finally:
                injector.sink.end(handle)
                injector.graph_replays += 1
                injector._count_iteration()

        graph_class.replay = replay
        self._unwraps.append(lambda: setattr(graph_class, "replay", original))

    def _wrap_phase(self, owner, attribute: str, phase: str, opens, closes, then: str = "", during: str = "") -> None:
        """Replaces ``owner.attribute`` with a wrapper that opens a range (``opens()`` returns
        what ``closes`` takes), times the call as ``phase`` in the untraced warm-up (with
        ``during``, only while that phase is open) and, with ``then``, starts that phase at
        its end; the original is put back on removal. A call made inside another (a nested
        ``backward()``) is timed as part of the outer one: timed on its own, its end closed
        the phase the outer call had opened, and the rest of the outer call went uncounted."""
        original = getattr(owner, attribute)
        injector = self
        depth = [0]   # a call inside a call (a backward() run from a custom Function's backward) is the outer one's

        def wrapper(*args, **kwargs):
            handle = opens()
            outermost = depth[0] == 0
            depth[0] += 1
            timed = outermost and injector._timing and (not during or during in injector._phase_open)
            if timed:
                injector._phase_start(phase)
            try:
                return original(*args, **kwargs)
            finally:
                depth[0] -= 1
                if timed:
                    injector._phase_end(phase)
                if outermost and injector._timing and then:
                    injector._phase_start(then)
                closes(handle)

        setattr(owner, attribute, wrapper)
        self._unwraps.append(lambda: setattr(owner, attribute, original))

    def _wrap_backward(self, autograd) -> None:
        """``loss.backward()`` calls ``torch.autograd.backward`` by name: one start/end range
        per call (autograd's device thread launches the kernels, so not a push/pop range);
        what follows the last backward up to the step's end is timed as ``after_backward``."""
        sink = self.sink

        def closes(handle) -> None:
            sink.end(handle)
            self._backward_done = self._iteration is not None
            self._zeroed_since_backward = False

        self._wrap_phase(autograd, "backward", "backward", lambda: sink.start(ranges.BACKWARD), closes,
                         then="after_backward")

    def _count_built_optimizers(self, optimizer_class) -> None:
        """Counts optimizers as they are built (every torch.optim class, and a third-party one
        that calls ``Optimizer.__init__``): a loop with none updates its parameters by hand."""
        original = optimizer_class.__init__
        injector = self

        def __init__(optimizer, *args, **kwargs):
            injector._optimizers_built += 1
            original(optimizer, *args, **kwargs)

        optimizer_class.__init__ = __init__
        self._unwraps.append(lambda: setattr(optimizer_class, "__init__", original))

    def _wrap_zero_grad(self, owner) -> None:
        """One ``cg-advise:zero_grad`` range per ``zero_grad`` call of an optimizer or a
        module: where patch takes the loop's call out of a full-iteration graph's loop, the host
        time it takes between iterations is not left eager (timed untraced too, the calls
        between iterations only, as the analyser reads the trace)."""
        sink = self.sink

        def opens():
            self._zeroed_since_backward = True
            return sink.push(ranges.ZERO_GRAD)

        self._wrap_phase(owner, "zero_grad", "zero_grad_between", opens, lambda _: sink.pop(), during="between")

    # -- module hooks ---------------------------------------------------------------
    def _has_parameters(self, module) -> bool:
        return next(module.parameters(), None) is not None

    def _child_names(self, root) -> dict:
        names = self._children.get(root)
        if names is None:
            names = {id(child): name for name, child in root.named_children()}
            self._children[root] = names
        return names

    def _before_forward(self, module, args) -> None:
        depth = self._depth
        self._depth += 1
        name = None
        if depth == 0 and self._in_backward():   # a checkpoint's recomputation: no call of the step's
            self._pushed.append(False)
            return
        if depth == 0 and self._has_parameters(module):
            self._root = module
            self._register_root(module)
            self._root_calls[id(module)] = self._root_calls.get(id(module), 0) + 1
            if self._top_level_call_begins(module):
                name = ranges.FORWARD
        elif depth == 1 and self._root is not None and self._pushed and self._pushed[-1]:   # in a marked call
            child = self._child_names(self._root).get(id(module))
            if child is not None:
                name = ranges.MODULE + child
                self.module_ranges += 1
        if name is not None:
            self.sink.push(name)
        self._pushed.append(name is not None)

    def _after_forward(self, module, args, output) -> None:
        if not self._pushed:  # a forward that began before install()
            return
        self._depth -= 1
        pushed = self._pushed.pop()
        if pushed:
            self.sink.pop()
        if self._depth == 0 and module is self._root:
            if pushed:
                self._top_level_call_ends(module)
            if self._root_calls.get(id(module), 0) > 1:   # called again: the step's models have all been seen
                self._adopt()

    def _in_backward(self) -> bool:
        """Whether autograd runs a backward on this thread: a module called then is recomputed
        by activation checkpointing, not called by the step."""
        try:
            return self._torch._C._current_graph_task_id() != -1
        except Exception:  # noqa: BLE001 - a torch without it: as before
            return False

    def _marks_call(self, module) -> bool:
        """Whether a top-level call is marked: every call of the first top-level module (an
        inference loop's iterations are its calls), the others' training calls only (a
        teacher's no_grad forward in a distillation step is not the step's forward)."""
        return self._root_index.get(id(module)) == 0 or self._is_training_call(module)

    def _top_level_call_begins(self, module) -> bool:
        """A call of a top-level module: the iteration it may open, and its host time, as the
        forward phase and as that module's own (``forward:<index>``); False where it is not
        marked (``_marks_call``)."""
        training = self._is_training_call(module)
        if training:
            self._trained_roots.add(id(module))
        elif self._opens_step(module):
            self._begin_iteration()
        if not self._marks_call(module):
            return False
        if training:
            self._count_trained_parameters(module)
            self._training_call_begins(module)
        if self._timing:
            index = self._root_index.get(id(module))
            self._phase_start("forward")
            self._phase_start(f"forward:{index}")
            if training:   # calls that record gradients: what a graphed forward replays
                self._phase_seconds[f"calls:{index}"] = self._phase_seconds.get(f"calls:{index}", 0) + 1
        return True

    def _opens_step(self, module) -> bool:
        """A call without grad of a module that never trained, once the script trains and
        between steps: a distillation teacher, a frozen encoder, run before the model that
        trains. The step begins there: a full-iteration graph captures it with the rest, and
        read as host work between steps it kept the distillation tutorial's prediction at
        3.33x where tune measured 6.57x. The evaluation of a trained model is not the step's."""
        return (self.trained_parameters is not None and id(module) not in self._trained_roots
                and self._iteration is None)

    def _top_level_call_ends(self, module) -> None:
        if self._timing:
            self._phase_end("forward")
            self._phase_end(f"forward:{self._root_index.get(id(module))}")
        # an inference loop's iterations are its calls; once the script trains, a call without
        # grad (a distillation teacher's, an evaluation's) is no iteration: counted as one, a
        # teacher called first made two of every training step
        if not self._is_training_call(module) and self.trained_parameters is None:
            self.inference_calls += 1
            self._count_iteration()

    def _register_root(self, module) -> None:
        """A top-level module's first call: its index, and the names it has in the script, so
        that a prediction can tell the modules a scope graphs (patch names them as the loop
        does) from the others: a GAN's discriminator, called twice a step, stays eager under
        fwd_bwd while its generator is graphed."""
        if id(module) in self._root_index:
            return
        self._root_index[id(module)] = len(self._roots)
        self._roots.append(weakref.ref(module))
        self.root_names.append(names_in_script(module, sys._getframe(1)))

    # -- once a top-level module is called again: hooks on the modules seen and their children --
    def _adopt(self) -> None:
        """Global module hooks slow down every module call; once a top-level module is called
        a second time, every top-level module of the step has been seen (the encoder and the
        decoder, a GAN's generator and discriminator): the global hooks are traded for thin
        wrappers of their and their children's forward (hooks on those would still take
        PyTorch's slow call path; the overhead budget is 2 %)."""
        for handle in self._handles[:2]:
            handle.remove()
        self._handles = self._handles[2:]
        for reference in self._roots:
            root = reference()
            if root is None:
                continue
            self._wrap_forward(root, self._before_root, self._after_root)
            for name, child in root.named_children():
                label = ranges.MODULE + name
                self._wrap_forward(child, lambda m, a, k, label=label: self._push_child(label), self._pop_child)

    def _wrap_forward(self, module, before, after) -> None:
        had_own = "forward" in module.__dict__
        original = module.forward

        def forward(*args, **kwargs):
            before(module, args, kwargs)
            output = None
            try:   # a call that raises (caught by the script) still closes its range
                output = original(*args, **kwargs)
                return output
            finally:
                after(module, args, output)

        module.forward = forward

        def unwrap() -> None:
            if had_own:
                module.forward = original
            else:
                del module.forward

        self._unwraps.append(unwrap)

    def _push_child(self, label: str) -> None:
        """A child's call inside a marked call of its top-level module (the last entry of
        ``_pushed``, its root's own: children of children are not wrapped)."""
        marked = bool(self._pushed) and self._pushed[-1]
        self._children_pushed.append(marked)
        if marked:
            self.module_ranges += 1
            self.sink.push(label)

    def _pop_child(self, module, args, output) -> None:
        if self._children_pushed.pop():
            self.sink.pop()

    def _before_root(self, module, args, kwargs) -> None:
        self._depth += 1
        if self._depth > 1 or self._in_backward():   # inside another top-level call, or recomputed in a backward
            self._pushed.append(False)
            return
        marked = self._top_level_call_begins(module)
        self._pushed.append(marked)
        if marked:
            self.sink.push(ranges.FORWARD)
            if self._is_training_call(module):
                self._count_layout(module, args, kwargs)

    def _count_layout(self, module, args, kwargs) -> None:
        """A training call's inputs, as patch's graphs compare them: each graph is captured for
        the shapes of its first call and replays only for those (another shape runs eagerly),
        so a loop whose batches change shape (padded to their longest sequence) gains on few
        steps. Counted from the first call after adoption, the third (the wrappers see keyword
        arguments; PyTorch's global hooks do not)."""
        try:
            layout = input_layout((args, kwargs), self._torch.is_tensor)
            counts = self.input_layouts.setdefault(self._root_index.get(id(module), -1),
                                                   {"first": layout, "calls": 0, "same": 0, "seen": set()})
            counts["calls"] += 1
            counts["same"] += layout == counts["first"]
            if len(counts["seen"]) < MAX_LAYOUTS:
                counts["seen"].add(hash(layout))
        except Exception:  # noqa: BLE001 - an input that cannot be read: not counted
            pass

    def _after_root(self, module, args, output) -> None:
        marked = self._pushed.pop()
        if marked:
            self.sink.pop()
        self._depth -= 1
        if marked:
            self._top_level_call_ends(module)

    def _training_call_begins(self, module) -> None:
        """A top-level training forward opens the iteration; in a loop that updates its
        parameters by hand (no optimizer built or stepped: the word-language-model example's
        ``p.data.add_(p.grad, alpha=-lr)``), it also ends the open one once that one's backward
        has run, since no optimizer step will: without this such a loop ran 0 iterations, and
        a profile never opened its recording window. Only once the gradients were zeroed since
        the backward (a ``zero_grad()`` call, or the model's first trained parameter without a
        gradient: ``p.grad = None`` by hand): a forward after the backward with the gradients
        still there is the same step's (micro-steps accumulating by hand, a train-mode forward
        that logs). With an optimizer, a second forward is always the same step's (a GAN's, a
        micro-step's); so it is inside a capture the script makes itself."""
        if self._ends_at_next_forward() and (self._zeroed_since_backward or _gradient_cleared(module)):
            if not self._capturing():
                self._end_step_by_hand()
        if self._iteration is None:
            self._begin_iteration()

    def _ends_at_next_forward(self) -> bool:
        """An open iteration whose backward has run, in a loop that built and stepped no
        optimizer: no step will end it."""
        return (self._iteration is not None and self._backward_done
                and not (self._optimizers_built or self.optimizers_stepped))

    def _capturing(self) -> bool:
        try:
            return bool(self._torch.cuda.is_current_stream_capturing())
        except Exception:  # noqa: BLE001 - a torch without CUDA support
            return False

    def finish(self) -> None:
        """At the script's end: the last step of a loop that updates its parameters by hand,
        which no next forward ends, is counted and its range closed (the window stops if it
        ends there, but the ending process is not cut short). An iteration a frozen model's
        call opened after the last step (an evaluation with a perceptual network) has its
        range closed and is not counted."""
        if not self._ends_at_next_forward():
            if self._iteration is not None:   # opened by a frozen model's call after the last step
                self.sink.end(self._iteration[0])
                self._iteration = None
            return
        on_exit, self.window.on_exit = self.window.on_exit, lambda: None
        try:
            self._end_step_by_hand()
        finally:
            self.window.on_exit = on_exit

    def _end_step_by_hand(self) -> None:
        """Ends a step that no optimizer step ends, counted as such in the summary."""
        self.steps_ended_at_next_forward += 1
        self._end_iteration()

    def _begin_iteration(self) -> None:
        if self._timing:
            self._phase_end("between")
        self._backward_done = False
        self._iteration = [self.sink.start(ranges.ITERATION)]  # the handle may be None

    def _is_training_call(self, module) -> bool:
        return module.training and self._torch.is_grad_enabled()

    def _count_trained_parameters(self, module) -> None:
        """Counted at the first training call, not the first call: a forward before training
        (an eval-mode sanity check, a loop that freezes layers after it) would count tensors
        that do not train, and an inference loop, where no parameter trains, keeps None."""
        if self.trained_parameters is None:
            self.trained_parameters = count_trained_parameters(module)

    # -- optimizer hook -------------------------------------------------------------
    def _before_step(self, optimizer, args, kwargs) -> None:
        """Opens the optimizer range. Returns None: PyTorch takes a pre-hook's return value as
        new arguments (and torch.cuda.nvtx.range_push, the fallback sink, returns a depth)."""
        self.sink.push(ranges.OPTIMIZER)
        self._describe(optimizer)   # before the phase's clock starts: its own cost stays out
        if self._timing:
            self._phase_start("optimizer")
        return None

    def _describe(self, optimizer) -> None:
        """At an optimizer's first step: its description (the first MAX_DESCRIBED), and the
        distinct parameter tensors a full-iteration graph makes capturable, so that an
        optimizer built again every epoch over the same parameters counts them once. Never
        raises: the user's step must go on whatever the optimizer is."""
        seen = self._optimizers_seen.get(id(optimizer))
        if seen is not None and seen() is optimizer:
            return
        try:
            self._optimizers_seen[id(optimizer)] = weakref.ref(optimizer)
        except TypeError:   # not weakly referable: kept alive, as the script keeps it anyway
            self._optimizers_seen[id(optimizer)] = lambda: optimizer
        self.optimizers_stepped += 1
        try:
            made = capturable_parameters(optimizer)
            description = describe_optimizer(optimizer, made)
            self.made_capturable.update((id(p), p.numel()) for p in made)
        except Exception as error:  # noqa: BLE001 - an optimizer of unusual shape
            description = {"class": type(optimizer).__name__, "error": f"{type(error).__name__}: {error}"}
        if len(self.optimizers) < MAX_DESCRIBED:
            self.optimizers.append(description)

    def _after_step(self, optimizer, args, kwargs) -> None:
        if self._timing:
            self._phase_end("optimizer")
        self.sink.pop()   # the optimizer range
        ends = self._step_cycle.ends(id(optimizer), self._optimizers_built)   # a GAN's generator step ends it
        if self._iteration is None:  # a second optimizer in the same iteration
            if self._timing and "between" in self._phase_open:
                self._phase_start("between")   # between begins after the iteration's last step
            return
        if ends:
            self._end_iteration()

    def _end_iteration(self) -> None:
        """The training step's end: at its (last) optimizer step, or, without an optimizer, at
        the next iteration's first forward (the update by hand, the logging and the next batch
        are then the step's ``after_backward``, and nothing runs between iterations)."""
        if self._timing:
            self._phase_end("after_backward")
        self.sink.end(self._iteration[0])
        self._iteration = None
        self.training_steps += 1
        self._count_iteration()
        if self._timing:   # the host work up to the next iteration: the data, logging, the loop
            self._phase_start("between")

    # -- window ---------------------------------------------------------------------
    def _count_iteration(self) -> None:
        self.iterations_done += 1
        window = self.window
        if not window.bounded:
            return
        done, warmup = self.iterations_done, window.warmup
        if self._opened_at is None:   # the warm-up: its second half timed, then the window opens
            if done >= timed_from(warmup):
                self._mark()
                self._timing = True
            if done >= warmup and not self._warmup_short():
                self._end_chunk()
                self._opened_at = done
                self._begin_window()
        elif self.recording and done == self._opened_at + window.iterations:
            self._end_window()
            self._after_left = warmup - timed_from(warmup) if self._untraced_chunks else 0
            if self._after_left > 0:   # as many iterations again, untraced, after the window
                self._mark()
                self._timing = True
            elif not window.run_to_end:
                window.on_exit()
        elif self._after_left > 0:
            self._mark()
            self._after_left -= 1
            if self._after_left == 0 and self._baseline_short():
                self._after_left = 1   # one more: the host's speed is read over seconds, not one moment
            if self._after_left == 0:
                self._end_chunk()
                if not window.run_to_end:
                    window.on_exit()

    def _warmup_short(self) -> bool:
        """Whether the warm-up's timed iterations span less than the window's
        ``baseline_before_seconds`` (host clock), fewer than MAX_BEFORE_ITERATIONS past the
        warm-up: the window then waits. Timed before the recording, the baseline sees the host
        as tune's eager windows do; after it, nsys still attached, it read a median 1.17x slower
        (bench/baseline_stretches.py)."""
        before = self.window.baseline_before_seconds
        if before <= 0 or self.iterations_done - self.window.warmup >= MAX_BEFORE_ITERATIONS:
            return False
        # a warm-up of one iteration has one mark yet: the stretch has not begun (with none,
        # the window opened before the script ran, nothing to wait for)
        return len(self._marks) < 2 or self._marks[-1][0] - self._marks[0][0] < before

    def _baseline_short(self) -> bool:
        """Whether the timed untraced iterations span less than the window's
        ``baseline_seconds`` (host clock), and the chunk after the window has timed fewer than
        MAX_AFTER_ITERATIONS. The lent H100's host launches at two speeds and the mix drifts from
        second to second: a launch-bound loop timed for 100 steps read processes of one script
        up to 1.58x apart, for 2000 steps 1.07-1.18x (bench/results/timing_span_h100/)."""
        timed_ms = sum(sum(chunk["host_ms"]) for chunk in self._untraced_chunks)
        now_ms = (self._marks[-1][0] - self._marks[0][0]) * 1e3 if self._marks else 0.0
        return (timed_ms + now_ms < self.window.baseline_seconds * 1e3
                and len(self._marks) <= MAX_AFTER_ITERATIONS)

    def _mark(self) -> None:
        try:
            event = self._torch.cuda.Event(enable_timing=True)
            event.record()
        except Exception:  # noqa: BLE001 - no CUDA (a CPU run): the host clock alone
            event = None
        self._marks.append((time.perf_counter(), event))
        self._phase_marks.append(self._phase_seconds)
        self._phase_seconds = {}

    # -- the phases' untraced host time -----------------------------------------------------
    def _phase_start(self, phase: str) -> None:
        self._phase_open[phase] = time.perf_counter()

    def _phase_end(self, phase: str) -> None:
        began = self._phase_open.pop(phase, None)
        if began is not None:
            self._phase_seconds[phase] = self._phase_seconds.get(phase, 0.0) + time.perf_counter() - began

    def _end_chunk(self) -> None:
        """Stops timing and sets the baseline from every chunk timed so far."""
        self._timing = False
        self._untraced_chunks.append(self._close_chunk())
        self.untraced = _untraced_figures(self._untraced_chunks)

    def _close_chunk(self) -> dict:
        """The timed iterations since the chunk's first mark, per iteration: the GPU timeline
        between CUDA events at iteration ends (what the GPU sees, gaps included), the host
        clock, and the host time of each phase the iterations ran (``after_backward``: from the
        last backward's end to the step's, ``between``: from the last step's end to the next
        iteration's start, what a full-iteration graph leaves eager. Not split further: the
        host work between micro-batches of gradient accumulation falls in no phase, and an
        evaluation call inside the loop is an iteration of its own)."""
        marks, self._marks = self._marks, []
        phases, self._phase_marks = self._phase_marks[1:], []   # each timed iteration's, from its end mark
        self._phase_open = {}
        chunk = {"host_ms": [(b[0] - a[0]) * 1e3 for a, b in zip(marks, marks[1:])], "phases": phases}
        if len(marks) > 1 and all(event is not None for _, event in marks):
            try:
                marks[-1][1].synchronize()
                chunk["gpu_ms"] = [a[1].elapsed_time(b[1]) for a, b in zip(marks, marks[1:])]
            except Exception:  # noqa: BLE001 - a device error leaves the host figure
                pass
        return chunk

    def timed_phases(self) -> list:
        """Each timed untraced iteration's phases, {phase: host seconds}, of the stretches timed
        and closed so far, in the order they ran (the calibration reads the edges of a plain
        loop's step from them)."""
        return [seconds for chunk in self._untraced_chunks for seconds in chunk["phases"]]

    def _begin_window(self) -> None:
        self.recording = True
        if getattr(self.sink, "in_window_only", False):
            self.sink.active = True
        self.window.on_start()

    def _end_window(self) -> None:
        self.recording = False
        self.window.on_stop()
        if getattr(self.sink, "in_window_only", False):
            self.sink.active = False

    def summary(self) -> dict:
        if self._after_left > 0 and len(self._marks) > 1:   # the script ended inside the second chunk
            self._after_left = 0
            self._end_chunk()
        return {
            "iterations": self.iterations_done,
            "training_steps": self.training_steps,
            "inference_calls": self.inference_calls,
            "module_ranges": self.module_ranges,
            "graph_replays": self.graph_replays,
            "steps_ended_at_next_forward": self.steps_ended_at_next_forward,
            "trained_parameters": self.trained_parameters,
            "optimizers": self.optimizers,
            "optimizers_stepped": self.optimizers_stepped,
            "made_capturable": {"tensors": len(self.made_capturable), "elements": sum(self.made_capturable.values())},
            "models": self.root_names,
            "input_layouts": {str(index): {"calls": c["calls"], "first_share": c["same"] / c["calls"],
                                           "distinct": len(c["seen"])}
                              for index, c in self.input_layouts.items() if c["calls"]},
            "untraced": self.untraced,
            **({"window_opened_at": self._opened_at} if self.window.bounded else {}),
        }


def _untraced_figures(chunks: list) -> dict:
    """ms per iteration, the median of the timed untraced iterations of every chunk (the
    second half of the warm-up, then as many iterations after the recording window): one slow
    iteration (a collection, a checkpoint) does not move it, and two stretches a window apart
    sample the host at two moments (its speed drifts by 1.2-1.4x between seconds on a lent
    H100 host: bench/host_speed_probe.py), where one stretch of 25 iterations timed one of
    them; every iteration is kept for inspection, and each chunk's median
    (``gpu_ms_by_chunk``), so that a report can show how far they were apart. With the median
    host time per iteration of each phase the iterations ran (``forward_ms_per_iteration``, ...)."""
    chunks = [chunk for chunk in chunks if chunk["host_ms"]]
    host = [ms for chunk in chunks for ms in chunk["host_ms"]]
    if not host:
        return {}
    out = {"iterations": len(host), "chunks": [len(chunk["host_ms"]) for chunk in chunks],
           "host_ms_per_iteration": statistics.median(host), "host_ms": host}
    phases = [seconds for chunk in chunks for seconds in chunk["phases"]]
    for phase in PHASES_TIMED:
        if any(phase in seconds for seconds in phases):
            out[f"{phase}_ms_per_iteration"] = statistics.median(seconds.get(phase, 0.0) * 1e3 for seconds in phases)
    # each top-level module's own host time and training calls per iteration, by its index in
    # the summary's ``models``: the share of the forward a scope that graphs some of them takes
    indices = sorted({key.split(":", 1)[1] for seconds in phases for key in seconds if key.startswith("forward:")},
                     key=int)
    if indices:
        out["forward_ms_by_model"] = {i: statistics.median(s.get(f"forward:{i}", 0.0) * 1e3 for s in phases)
                                      for i in indices}
        out["forward_calls_by_model"] = {i: statistics.median(s.get(f"calls:{i}", 0) for s in phases)
                                         for i in indices}
    out["host_ms_by_chunk"] = [statistics.median(chunk["host_ms"]) for chunk in chunks]
    timed = [chunk for chunk in chunks if chunk.get("gpu_ms")]   # a device error leaves a chunk host-timed only
    if timed:
        gpu = [ms for chunk in timed for ms in chunk["gpu_ms"]]
        out.update(gpu_ms_per_iteration=statistics.median(gpu), gpu_ms=gpu,
                   gpu_ms_by_chunk=[statistics.median(chunk["gpu_ms"]) for chunk in timed])
    return out


SCRIPT_FRAMES = 6   # frames outside torch and cg-advise read for a top-level module's names
MAX_LAYOUTS = 64    # distinct input layouts told apart per top-level module (more read as this many)


def input_layout(value, is_tensor, depth: int = 0):
    """The shapes and dtypes of the tensors in a call's arguments (nested in tuples, lists and
    dicts, three levels deep), the other values by type alone: what tells one batch's shape
    from another's."""
    if is_tensor(value):
        return tuple(value.shape), str(value.dtype)
    if depth < 3 and isinstance(value, (tuple, list)):
        return tuple(input_layout(item, is_tensor, depth + 1) for item in value)
    if depth < 3 and isinstance(value, dict):
        return tuple((key, input_layout(item, is_tensor, depth + 1)) for key, item in value.items())
    return type(value).__name__


def _forward_hook_always_called(nn_module, hook):
    """The global forward hook, called also when a forward raises (torch >= 2.0), so that the
    depth it keeps comes back to 0 after a checkpoint's recomputation that ends in an exception."""
    try:
        return nn_module.register_module_forward_hook(hook, always_call=True)
    except TypeError:   # an older torch
        return nn_module.register_module_forward_hook(hook)


def names_in_script(module, frame) -> list:
    """The names ``module`` has where the script calls it, as patch names models: a local or
    global variable (``model``), an attribute of ``self`` (``self.net``), in the first
    SCRIPT_FRAMES frames outward that are not torch's or cg-advise's own (a helper that takes
    the model as ``m`` adds ``m``, its caller ``model``). Never raises."""
    names = []
    try:
        import torch

        # this file's folder by its own __file__: run as ``python -m advisor.inject`` this module
        # is __main__, and sys.modules["__main__"] is the user's script once it runs
        own = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (torch.__file__, __file__))
        seen = 0
        while frame is not None and seen < SCRIPT_FRAMES:
            if not os.path.abspath(frame.f_code.co_filename).startswith(own):
                seen += 1
                names += [n for n, v in frame.f_locals.items() if v is module and n != "self"]
                owner = frame.f_locals.get("self")
                attributes = {**getattr(owner, "__dict__", {}), **(getattr(owner, "_modules", None) or {})}
                names += [f"self.{n}" for n, v in attributes.items() if v is module]
                names += [n for n, v in frame.f_globals.items() if v is module]
            frame = frame.f_back
    except Exception:  # noqa: BLE001 - an unusual frame or mapping: the names found so far
        pass
    return list(dict.fromkeys(names))


def count_trained_parameters(module) -> int:
    """The parameter tensors that train: graphed callables pay host work for each of them after
    every replay (a gradient handed to autograd and copied out of the graph's static output),
    so their host cost follows this count, not the number of kernels."""
    return sum(1 for p in module.parameters() if p.requires_grad)


MAX_DESCRIBED = 8   # optimizers described in the run record; a script that builds one per epoch
                    # still counts every distinct parameter it steps (made_capturable)


def capturable_parameters(optimizer) -> list:
    """The parameters in the groups a full-iteration graph makes capturable: ``capturable``
    False (the optimizers that have the flag: Adam's family, RMSprop, Rprop, Adadelta, ASGD;
    not Adagrad, whose groups have no such key), not fused (tuner's helper turns the flag on; patch writes it into an
    Adam-family constructor)."""
    return [p for group in getattr(optimizer, "param_groups", None) or ()
            if group.get("capturable") is False and not group.get("fused") for p in group.get("params", ())]


def describe_optimizer(optimizer, made: Optional[list] = None) -> dict:
    """An optimizer as a full-iteration graph will step it: its class, its parameter tensors,
    and how many of those (and their elements) the graph makes capturable
    (``made``, else ``capturable_parameters``). A capturable step keeps its step counts on the GPU and
    computes the bias corrections there, kernels that the eager step (counts on the host) never
    launches, some over every element of the state: the graph's GPU time grows with both
    counts, and the eager trace cannot show it."""
    groups = getattr(optimizer, "param_groups", None) or []
    made = capturable_parameters(optimizer) if made is None else made
    ids = {id(p) for p in made}
    holding = [group for group in groups if any(id(p) in ids for p in group.get("params", ()))]
    return {"class": type(optimizer).__name__, "parameters": sum(len(group.get("params", ())) for group in groups),
            "made_capturable": len(made), "made_capturable_elements": sum(p.numel() for p in made),
            # what the calibration needs to step the same update (advisor.calibrate --capturable):
            # torch's own class (a subclass may step otherwise), the groups and dtypes of the
            # tensors made capturable, and whether a group turned foreach off (a loop per tensor)
            "torch_class": type(optimizer).__module__.startswith("torch.optim"),
            "made_capturable_groups": len(holding),
            "made_capturable_dtypes": sorted({str(p.dtype) for p in made}),
            "made_capturable_foreach_off": any(group.get("foreach") is False for group in holding)}


BASELINE_SECONDS = 3.0         # untraced seconds timed at least (CG_ADVISE_BASELINE_SECONDS), where the script runs that long
MAX_AFTER_ITERATIONS = 5000   # iterations timed after the window at most, however short
MAX_BEFORE_ITERATIONS = 5000  # iterations the window waits past the warm-up at most (CG_ADVISE_BASELINE_BEFORE)


def timed_from(warmup: int) -> int:
    """The first warm-up iteration whose end is timed: the first half warms up (allocator,
    cuDNN autotuning, lazy initialisation), the second half is the untraced baseline."""
    return max(1, warmup // 2)


def window_from_env(environ=os.environ, recorder: Optional[KinetoRecorder] = None) -> Window:
    """The window from the environment; its start/stop drive Nsight Systems' capture range
    (cudaProfilerStart/Stop), or ``recorder`` (the torch backend) when one is given."""
    iterations = environ.get("CG_ADVISE_ITERATIONS")
    # under torchrun every rank stops after the same iterations: one that read its own clock
    # and stopped sooner (or opened its window later) would leave the others waiting in a collective
    distributed = int(environ.get("WORLD_SIZE", "1")) > 1
    return Window(
        warmup=int(environ.get("CG_ADVISE_WARMUP", "0")),
        iterations=int(iterations) if iterations else None,
        run_to_end=environ.get("CG_ADVISE_RUN_TO_END", "0") == "1",
        baseline_seconds=0.0 if distributed else float(environ.get("CG_ADVISE_BASELINE_SECONDS", str(BASELINE_SECONDS))),
        baseline_before_seconds=0.0 if distributed else float(environ.get("CG_ADVISE_BASELINE_BEFORE", "0")),
        on_start=recorder.start if recorder else _cuda_profiler_start,
        on_stop=recorder.stop if recorder else _cuda_profiler_stop,
        on_exit=_exit_now,
    )


def injector_from_env(environ=os.environ) -> "Injector":
    """The Injector for this run: NVTX ranges for Nsight Systems, or record_function ranges
    and a torch.profiler recorder when ``CG_ADVISE_KINETO_TRACE`` names the trace file. The
    torch backend always records a bounded window (the whole run when none is given)."""
    trace = environ.get("CG_ADVISE_KINETO_TRACE")
    if not trace:
        window = window_from_env(environ)
        # CG_ADVISE_RANGES=window: no range outside a bounded window (bench/gpu_baselines.py's gated mode)
        return Injector(NvtxSink(in_window_only=window.bounded and environ.get("CG_ADVISE_RANGES") == "window"), window)
    sink = RecordFunctionSink()
    window = window_from_env(environ, KinetoRecorder(trace, sink))
    if not window.bounded:  # no window: record from the first iteration to the end of the run
        window.iterations = sys.maxsize
        window.run_to_end = True
    return Injector(sink, window)


def run_target(argv: list) -> None:
    """Runs ``script.py args`` or ``-m module args`` as ``__main__`` with its own argv."""
    if argv and argv[0] == "-m":
        module, rest = argv[1], argv[2:]
        sys.argv = [module, *rest]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        script, rest = argv[0], argv[1:]
        sys.argv = [script, *rest]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv == ["-m"]:
        print("usage: python -m advisor.inject script.py [args...] | -m module [args...]", file=sys.stderr)
        raise SystemExit(2)
    injector = injector_from_env().install()
    summary_path = os.environ.get("CG_ADVISE_SUMMARY")
    if summary_path:
        injector.window.on_exit = _write_summary_then(injector, summary_path, _exit_now)
    try:
        run_target(argv)
    finally:
        injector.finish()
        if injector.recording and isinstance(injector.sink, RecordFunctionSink):
            injector.recording = False   # the script ended inside the window: keep what was recorded
            injector.window.on_stop()
        if summary_path:
            _write_summary(injector, summary_path)


def _write_summary(injector: Injector, path: str) -> None:
    with open(path, "w") as handle:
        json.dump(injector.summary(), handle)


def _write_summary_then(injector, path, then):
    def write_and_exit() -> None:
        _write_summary(injector, path)
        then()

    return write_and_exit


if __name__ == "__main__":
    main()
