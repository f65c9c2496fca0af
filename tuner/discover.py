"""Finds the step in a user's script, and what the tuner and the patch need to know about it:
the training loop whose body runs ``<loss>.backward()`` and ``<optimizer>.step()``, or, when
there is none, an inference loop that calls a model under ``torch.no_grad()`` or
``torch.inference_mode()``."""

from __future__ import annotations

import builtins
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from advisor.errors import CgAdviseError
from advisor.sourcefile import read_source

OPTIMIZER_MODULES = ("optim.", "torch.optim.", "bnb.optim.", "apex.optimizers.")
SCHEDULER_HINTS = ("lr_scheduler", "Scheduler", "scheduler")
NO_GRAD = ("no_grad", "inference_mode")
MODEL_HINTS = ("nn.", ".eval", ".cuda", ".to", "from_pretrained", "Model", "torch.jit.load", "torch.load")


class DiscoveryError(CgAdviseError):
    pass


class UncapturableLoop(DiscoveryError):
    """The training loop was found, and no capture can hold its step (an L-BFGS closure, whose
    step calls the model several times): no scope applies, not just no rewrite of ours."""


@dataclass
class Outside:
    """A statement in the step that must stay out of a captured region."""

    line: int
    code: str
    reason: str


@dataclass
class StepSpec:
    path: str
    loop_kind: str               # "for" or "while"
    line: int
    end_line: int
    function: Optional[str]      # enclosing function, None at module level
    model: Optional[str]
    optimizer: str
    loss: str
    batch: list
    scheduler: Optional[str] = None
    scaler: Optional[str] = None  # torch.cuda.amp / torch.amp GradScaler
    autocast: bool = False
    clip_grad: bool = False
    outside: list = field(default_factory=list)
    lr_set: Optional[int] = None  # the line that sets the LR by hand in the loop (a schedule without a scheduler)
    manual_update: Optional[int] = None  # the line of a hand-written parameter update, when no optimizer steps
    kind: str = "train"           # or "inference": no backward, the model called without grad
    step_name: Optional[str] = None   # --step, when the user named the function
    optimizers: list = field(default_factory=list)  # every optimizer the iteration steps, in order (a GAN: two)
    models: list = field(default_factory=list)      # modules called with grad in the iteration, in call order
    calls: dict = field(default_factory=dict)       # model -> how often the loop body calls it (a loop inside: 2)
    backwards: int = 1            # backward() calls an iteration makes; 0: they vary (inside a condition, a loop of unknown length)
    step_call: Optional[int] = None   # the line of a call of the script's code that runs backward and the step
    through_calls: bool = False   # backward or step found inside such a call (conditional or not)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        where = f"in {self.function}()" if self.function else "at module level"
        batch = ", ".join(self.batch) or "?"
        if self.kind == "inference":
            return (f"{self.loop_kind} loop at {self.path}:{self.line}-{self.end_line} {where}: "
                    f"model {self.model}, without grad")
        extras = [name for name, on in (("AMP", self.autocast or self.scaler), ("grad clipping", self.clip_grad),
                                        (f"scheduler {self.scheduler}", self.scheduler)) if on]
        return (f"{self.loop_kind} loop at {self.path}:{self.line}-{self.end_line} {where}: model {self.model or '?'}, "
                + (f"optimizer {', '.join(self.optimizers or [self.optimizer])}" if self.optimizer else
                   f"a hand-written update at line {self.manual_update}")
                + f", loss {self.loss}, batch ({batch})"
                + (f"; {', '.join(extras)}" if extras else ""))


def code_of(node) -> str:
    """A libcst node's source text as it prints on its own, outside any module: what a
    message quotes from the user's script."""
    return cst.Module([]).code_for_node(node)


def dotted(node) -> str:
    """``torch.optim.AdamW`` for an Attribute chain, ``x`` for a Name, '' otherwise."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    return ""


def target_names(node) -> list:
    if isinstance(node, (cst.Name, cst.Attribute)):
        return [dotted(node)] if dotted(node) else []
    if isinstance(node, (cst.Tuple, cst.List)):
        return [n for element in node.elements for n in target_names(element.value)]
    return []


class _Assignments(cst.CSTVisitor):
    """name -> the dotted callee it was assigned from, and the optimizer's parameter owner."""

    def __init__(self):
        self.constructed = {}
        self.params_owner = {}
        self.sources = {}    # name -> the code of its (last) call assignment
        self.callees = {}    # name -> the dotted callee of every call assignment to it, in order

    def visit_Assign(self, node: cst.Assign) -> None:
        if not isinstance(node.value, cst.Call):
            return
        code, callee = code_of(node.value), dotted(node.value.func)
        owner = _parameters_owner(node.value)
        for target in node.targets:
            for name in target_names(target.target):
                self.sources[name] = code
                self.constructed[name] = callee
                self.callees.setdefault(name, []).append(callee)
                if owner:
                    self.params_owner[name] = owner


class _Definitions(cst.CSTVisitor):
    """Names that are not models wherever they are called: imported modules and functions,
    and the functions and classes the script defines."""

    def __init__(self):
        self.names = set(dir(builtins))

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self.names.add(alias.evaluated_alias or dotted(alias.name).split(".")[0])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if not isinstance(node.names, cst.ImportStar):
            self.names.update(alias.evaluated_alias or dotted(alias.name) for alias in node.names)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.names.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.names.add(node.name.value)


def _star_imported_calls(wrapper) -> set:
    """Where the script imports with ``*`` (``from torch.distributions import *``, ``from utils
    import *``): the names it calls but never binds itself, which only such an import can bind,
    so classes and functions (``Categorical(logits=...)``, ``mixup_data(x, y)``), no model the
    script built. Graphed as models, a rewrite replaced a class's forward or compiled it."""
    if not any(isinstance(n.names, cst.ImportStar) for n in nodes(wrapper.module, cst.ImportFrom)):
        return set()
    scopes = wrapper.resolve(ScopeProvider)
    bound = {a.name for scope in set(scopes.values()) if scope is not None for a in scope.assignments}
    return {c.func.value for c in nodes(wrapper.module, cst.Call) if isinstance(c.func, cst.Name)} - bound


LOSS_HINTS = ("loss", "criterion")
# what a name built by one of these is called for is no model: a record type (the DQN tutorial's
# ``Transition = namedtuple(...)``, then ``Transition(*zip(*transitions))`` in its step), a
# getter or a bound call
NOT_MODEL_FACTORIES = ("namedtuple", "NamedTuple", "make_dataclass", "partial", "itemgetter", "attrgetter",
                       "methodcaller")


def _models(body: "_LoopBody", assignments: _Assignments, definitions: _Definitions, steppers: set,
            owner: Optional[str]) -> tuple:
    """The modules the iteration calls with grad, from the calls themselves: ``model(x)``,
    ``self.model(x)``, ``encoder(x)`` then ``head(features)``; not imported functions
    (``F.cross_entropy``), builtins, names the loop body binds (``for callback in callbacks``),
    the script's own functions and classes, criteria
    (``criterion``, ``loss_fn``, an ``nn.*Loss()``), optimizers, schedulers or scalers. The
    optimizer's parameter owner comes first. Returns (models, calls per model)."""
    counts = {}
    for name, _ in body.with_grad:
        root = name.split(".")[0]
        if "." in name and not (root == "self" and name.count(".") == 1) and name not in assignments.sources:
            continue  # `x.view(...)`, `torch.randn(...)`: a method or a module's function
        constructed = assignments.constructed.get(name, "")
        if (root in definitions.names or name in body.bound or root in steppers or name in steppers
                or ("." in name and name.rsplit(".", 1)[1] in definitions.names)   # self.trigger_callbacks()
                or any(h in name.lower() for h in LOSS_HINTS) or "Loss" in constructed or constructed.rpartition(".")[2] in NOT_MODEL_FACTORIES):
            continue
        counts[name] = counts.get(name, 0) + 1
    models = sorted(counts, key=lambda m: m != owner)
    if not models and owner:
        models = [owner]   # called inside a function the loop calls: found through the optimizer
    return models, counts


class SkippingVisitor(cst.CSTVisitor):
    """A visitor that does not descend into the nodes it is given (the captured step's
    statements, when what is asked is what lies around them)."""

    def __init__(self, skip=()) -> None:
        super().__init__()
        self.skipped = {id(n) for n in skip}

    def on_visit(self, node) -> bool:
        return id(node) not in self.skipped and super().on_visit(node)


def nodes(node, types, skip=()) -> list:
    """The nodes of ``types`` in ``node`` (itself included), not in or under the nodes in ``skip``."""
    found = []

    class Finder(SkippingVisitor):
        def on_visit(self, n) -> bool:
            if isinstance(n, types) and id(n) not in self.skipped:
                found.append(n)
            return super().on_visit(n)

    node.visit(Finder(skip))
    return found


def calls_in(node, predicate) -> list:
    """The calls inside ``node`` (itself included) for which ``predicate`` holds, in source order."""
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            if predicate(call):
                found.append(call)

    node.visit(Finder())
    return found


def calls_backward(node) -> bool:
    """Whether ``node`` calls ``<something>.backward()`` anywhere inside it."""
    return bool(calls_in(node, lambda c: isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"))


def _parameters_owner(call: cst.Call) -> Optional[str]:
    """``model`` in ``AdamW(model.parameters(), ...)`` (also inside lists and dicts)."""
    found = [c for arg in call.args for c in calls_in(arg.value, lambda c: isinstance(c.func, cst.Attribute)
                                                     and c.func.attr.value in ("parameters", "named_parameters"))]
    return dotted(found[0].func.value) if found else None


class _LoopBody(cst.CSTVisitor):
    """Calls inside one loop, not descending into nested functions or classes."""

    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, positions):
        self.positions = positions
        self.backward, self.step, self.zero_grad = [], [], []
        self.scaler_steps, self.calls, self.outside = [], [], []
        self.call_nodes = []      # the Call nodes of ``calls``, in the same order
        self.step_calls = []      # (name, line) of calls of the script's code that run backward and step
        self.through_calls = False   # the backward or the step found inside such a call
        self.inline = False          # backward and step called in the loop itself
        self.autocast = False
        self.clip_grad = False
        self.assigned_from_next = []
        self.with_grad = []       # (callee, line) of calls outside no_grad blocks, nested loops counted twice
        self.lr_set = []          # lines that set a learning rate by hand: `param_group["lr"] = lr`
        self._no_grad = 0
        self._loops = 0
        self._repeats = []
        self.bound = set()        # names the body binds: a callback of `for callback in ...` is no model
        self.manual_updates = []  # (line, model) of `for p in model.parameters(): p.data.add_(p.grad, ...)`
        self.closures = []        # lines of functions defined in the body that call backward()
        self.backward_times = []  # how often each backward() call runs an iteration: None where it varies
        self._times = []          # each enclosing loop or condition inside the body: its fixed count, or None

    # a call inside a loop in the body runs several times per iteration; a micro-step loop that
    # also runs backward consumes each call's activations before the next call, so it counts once
    def _enter_loop(self, node) -> None:
        repeats = not calls_backward(node.body)
        self._repeats.append(repeats)
        self._loops += repeats
        self._times.append(_fixed_count(node))

    def _leave_loop(self, node) -> None:
        self._loops -= self._repeats.pop()
        self._times.pop()

    # a backward() under a condition runs a varying number of times an iteration
    def visit_If(self, node) -> None:
        self._times.append(None)

    def leave_If(self, node) -> None:
        self._times.pop()

    def visit_IfExp(self, node) -> None:   # `a.backward() if c else b.backward()`: one or the other
        self._times.append(None)

    def leave_IfExp(self, node) -> None:
        self._times.pop()

    def visit_For(self, node) -> None:
        self.bound.update(target_names(node.target))
        self._enter_loop(node)
        owner = _manual_update(node)
        if owner is not None:
            self.manual_updates.append((self.positions[node].start.line, owner))

    def leave_For(self, node) -> None:
        self._leave_loop(node)

    def visit_While(self, node) -> None:
        self._enter_loop(node)

    def leave_While(self, node) -> None:
        self._leave_loop(node)

    def visit_ListComp(self, node) -> None:
        self._loops += 1

    def leave_ListComp(self, node) -> None:
        self._loops -= 1

    def visit_GeneratorExp(self, node) -> None:
        self._loops += 1

    def leave_GeneratorExp(self, node) -> None:
        self._loops -= 1

    def visit_FunctionDef(self, node) -> bool:
        # a closure that runs backward (LBFGS's optimizer.step(closure)) makes this a training loop
        if calls_backward(node.body):
            self.closures.append(self.positions[node].start.line)
        return False

    def visit_ClassDef(self, node) -> bool:
        return False

    def visit_With(self, node: cst.With) -> None:
        for item in node.items:
            call = item.item
            if isinstance(call, cst.Call) and dotted(call.func).split(".")[-1] == "autocast":
                self.autocast = True
        if any(_is_no_grad(item.item) for item in node.items):
            self._no_grad += 1

    def leave_With(self, node: cst.With) -> None:
        if any(_is_no_grad(item.item) for item in node.items):
            self._no_grad -= 1

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.bound.update(target_names(node.target))

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Call) and dotted(node.value.func) == "next":
            for target in node.targets:
                self.assigned_from_next += target_names(target.target)
        if any(_is_lr_key(t.target) for t in node.targets):
            self.lr_set.append(self.positions[node].start.line)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if _is_lr_key(node.target):
            self.lr_set.append(self.positions[node].start.line)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = dotted(func)
        line = self.positions[node].start.line
        if isinstance(func, cst.Attribute):
            receiver, method = dotted(func.value), func.attr.value
            if method == "backward" and isinstance(func.value, cst.Call) and node_args(func.value):
                # scaler.scale(loss).backward(): the loss is scale's argument
                receiver = dotted(node_args(func.value)[0])
            if method == "backward":
                # `loss.backward()`, or an unnamed loss: `criterion(model(x), y).backward()`
                self.backward.append((receiver or code_of(func.value), line))
                self.backward_times.append(None if None in self._times else math.prod(self._times))
            elif method == "step":
                if node.args and receiver:
                    self.scaler_steps.append((receiver, dotted(node.args[0].value), line))
                elif receiver:
                    self.step.append((receiver, line))
            elif method == "zero_grad" and receiver:
                self.zero_grad.append(receiver)
            if method.startswith("clip_grad_norm") or method.startswith("clip_grad_value"):
                self.clip_grad = True
        host = host_call(node)
        if host:
            self.outside.append((line, *host))
        self.calls.append((name, line))
        self.call_nodes.append(node)
        if name and not self._no_grad:
            self.with_grad += [(name, line)] * (2 if self._loops else 1)


SYNC_METHODS = ("item", "cpu", "tolist", "numpy")        # tensor -> host value: waits for the GPU
SYNC_FUNCTIONS = ("torch.cuda.synchronize",)
LOGGING_PREFIXES = ("logging.", "logger.", "log.", "wandb.")
CONVERSIONS = ("int", "float", "bool")   # of a tensor: its value on the host, as .item()
HOST_MODULES = ("np", "numpy", "math", "random", "statistics", "os", "sys", "time", "json", "len", "str")


def host_call(call: cst.Call) -> Optional[tuple]:
    """(what, why) when the call must run on the host every step, so outside a graph (a capture
    would run it once, or fail on the sync), else None. Discovery reports these; the rewriter
    moves them after the replay, or refuses when the step needs their value."""
    name = dotted(call.func)
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in SYNC_METHODS:
        method = call.func.attr.value
        return method, f".{method}() copies to the host and syncs: read it outside the graph"
    if name in SYNC_FUNCTIONS:
        return name, "a device sync: keep it outside the captured region"
    if name in CONVERSIONS and tensor_method_result(call):
        return name, f"{name}() of a tensor copies it to the host and syncs: read it outside the graph"
    if name == "print" or name.startswith(LOGGING_PREFIXES):
        return name, "logging runs on the host: keep it outside the captured region"
    return None


def tensor_method_result(call: cst.Call) -> bool:
    """Whether a conversion's one argument is what a method or torch function returns (``int(mask.sum())``,
    ``bool(torch.isnan(loss))``): a tensor, as far as the source tells; not a function of the
    host's modules (``float(np.mean(xs))``) nor a name, which may hold a number."""
    if len(call.args) != 1 or call.args[0].star or not isinstance(call.args[0].value, cst.Call):
        return False
    inner = call.args[0].value
    root = dotted(inner.func).split(".")[0]
    return (isinstance(inner.func, cst.Attribute) and root not in HOST_MODULES
            and inner.func.attr.value not in HOST_VALUE_METHODS)


# methods whose value is the host's already: a tensor's size (``int(x.size(0))``), a dict's entry
HOST_VALUE_METHODS = ("size", "dim", "ndimension", "numel", "nelement", "element_size", "stride", "get", "get_last_lr",
                      "count", "index", "__len__")


def _manual_update(loop: cst.For) -> Optional[str]:
    """The model of a hand-written update, ``for p in model.parameters(): p.data.add_(p.grad,
    alpha=-lr)`` (or ``p -= lr * p.grad``, ``p.sub_(...)``): a loop over parameters whose body
    reads ``p.grad`` and changes ``p`` in place. None for any other loop; '' when the
    parameters come from a list rather than ``<model>.parameters()``."""
    names = target_names(loop.target)
    if len(names) != 1:
        return None
    p = names[0]
    reads_grad, changes = [], []

    class Finder(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value == "grad" and dotted(node.value) in (p, f"{p}.data"):
                reads_grad.append(node)

        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            if (isinstance(func, cst.Attribute) and func.attr.value.endswith("_")
                    and dotted(func.value) in (p, f"{p}.data")):
                changes.append(node)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if dotted(node.target) in (p, f"{p}.data"):
                changes.append(node)

    loop.body.visit(Finder())
    if not (reads_grad and changes):
        return None
    iterated = loop.iter
    if (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute)
            and iterated.func.attr.value == "parameters"):
        return dotted(iterated.func.value)
    return ""


def _is_lr_key(target) -> bool:
    """``group["lr"]`` or ``optimizer.param_groups[0]["lr"]`` as an assignment target."""
    if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
        return False
    index = target.slice[0].slice
    return (isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString)
            and index.value.evaluated_value == "lr")


def node_args(call: cst.Call) -> list:
    return [arg.value for arg in call.args]


def _on_side_stream(node: cst.With) -> bool:
    """``with torch.cuda.stream(side):``: the warm-up of a CUDA graph the script captures itself."""
    return any(isinstance(item.item, cst.Call) and dotted(item.item.func).endswith("cuda.stream")
               for item in node.items)


class _Loops(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (PositionProvider, ParentNodeProvider)

    def __init__(self):
        self.loops = []       # (node, function name)
        self.qualnames = {}   # loop -> "Class.method" / "outer.inner" / "" at module level
        self._functions = []
        self._scopes = []
        self._side_streams = 0   # inside `with torch.cuda.stream(...)`

    def visit_With(self, node) -> None:
        self._side_streams += _on_side_stream(node)

    def leave_With(self, node) -> None:
        self._side_streams -= _on_side_stream(node)

    def visit_ClassDef(self, node) -> None:
        self._scopes.append(node.name.value)

    def leave_ClassDef(self, node) -> None:
        self._scopes.pop()

    def visit_FunctionDef(self, node) -> None:
        self._functions.append(node.name.value)
        self._scopes.append(node.name.value)

    def leave_FunctionDef(self, node) -> None:
        self._functions.pop()
        self._scopes.pop()

    def visit_For(self, node) -> None:
        self._add(node)

    def visit_While(self, node) -> None:
        self._add(node)

    def _add(self, node) -> None:
        if self._side_streams:
            return   # the warm-up before a capture the script writes itself (PyTorch's docs' pattern)
        self.loops.append((node, self._functions[-1] if self._functions else None))
        self.qualnames[node] = ".".join(self._scopes)

    def restrict(self, path: Path, step: str) -> None:
        """Keep the loops inside the function named by ``--step [module:]function``."""
        module, _, function = step.rpartition(":")
        if module and module != path.stem:
            raise DiscoveryError(f"--step {step}: the function must be in {path.name} (module {path.stem}), "
                                 "the script that is rewritten")
        # `fit` or `Trainer.fit` names the loops in Trainer.fit, and in functions nested in it
        inside = [(n, f) for n, f in self.loops if f".{function}." in f".{self.qualnames[n]}."]
        if not inside:
            functions = sorted({q for q in self.qualnames.values() if q})
            raise DiscoveryError(f"--step {step}: no loop inside a function {function} in {path.name}; functions "
                                 f"with loops: {', '.join(functions) or 'none'}")
        self.loops = inside


def discover(path, source: Optional[str] = None, step: Optional[str] = None) -> StepSpec:
    """The innermost loop that runs both backward and an optimizer step (else an inference
    loop), among the loops of the function ``step`` names when it is given."""
    path = Path(path)
    if source is None:
        if not path.exists():
            raise DiscoveryError(f"{path}: no such file")
        source = read_source(path).text
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise DiscoveryError(f"{path}: not a Python script ({error.message} at line {error.raw_line})") from None
    wrapper = MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    assignments = _Assignments()
    wrapper.module.visit(assignments)
    loops = _Loops()
    wrapper.visit(loops)
    if step:
        loops.restrict(path, step)

    functions = _FunctionDefs()
    wrapper.module.visit(functions)   # with its classes' methods, beside script_functions' map
    bodies = {}
    candidates = []
    for node, function in loops.loops:
        body = bodies[node] = _LoopBody(positions)
        node.body.visit(body)
        body.inline = bool(body.backward and (body.step or body.scaler_steps or body.manual_updates))
        _steps_inside_calls(body, assignments, functions, positions, loop_class(loops.qualnames[node], functions.classes))
        _schedulers_given_a_value(body, assignments)
        _steps_of_other_objects(body, assignments)
        optimizers = _optimizers(body, assignments)
        if body.backward and (optimizers or body.manual_updates):
            candidates.append((node, function, body, optimizers))
    if not candidates:
        # a script that trains must get its training loop, never its validation loop in its place
        closures = [(positions[n].start.line, bodies[n].closures[0]) for n, _ in loops.loops if bodies[n].closures]
        if closures:
            raise UncapturableLoop(f"{path}: the loop at line {closures[0][0]} trains through a closure (line "
                                 f"{closures[0][1]}: backward() inside a function passed to the optimizer's step, as "
                                 "LBFGS needs); its steps call the model several times and cannot be captured, and "
                                 "cg-advise does not tune another loop of a training script in its place")
        training = [positions[n].start.line for n, _ in loops.loops if bodies[n].backward]
        if training:
            raise DiscoveryError(f"{path}: the loop at line {training[0]} calls backward() but no <optimizer>.step() "
                                 "was recognised in it (a manual update, or a step inside a function it calls); "
                                 "cg-advise rewrites loops that call <optimizer>.step() themselves, and does not "
                                 "tune another loop of a training script in its place")
        inference = _inference_loop(path, wrapper, positions, loops, bodies, assignments)
        if inference:
            inference.step_name = step
            return inference
        found = [f"{'for' if isinstance(n, cst.For) else 'while'} loop at line {positions[n].start.line}"
                 for n, _ in loops.loops]
        raise DiscoveryError(f"{path}: no training loop (a for/while loop whose body calls <loss>.backward() "
                             f"and <optimizer>.step()) and no inference loop (one that calls a model under "
                             f"torch.no_grad() or torch.inference_mode()) found; loops seen: "
                             f"{', '.join(found) or 'none'}")
    # innermost: the candidate no other candidate lies inside
    # a loop that runs backward and step itself wins over one that reaches them through a call
    # (a WGAN's `for _ in range(5): train_critic(real)` inside its training loop)
    inline = [c for c in candidates if c[2].inline] or candidates
    node, function, body, optimizers = min(inline, key=lambda c: _span(positions, c[0]))
    optimizer = optimizers[0] if optimizers else ""   # "": a hand-written update, no optimizer object
    loss = body.backward[0][0]
    scaler = next((r for r, opt, _ in body.scaler_steps if opt == optimizer), None)
    scheduler = next((r for r, _ in body.step if r not in optimizers and _is_scheduler(r, assignments)), None)
    definitions = _Definitions()
    wrapper.module.visit(definitions)
    definitions.names |= _star_imported_calls(wrapper)
    lr_calls = _lr_set_through_functions(body, assignments, functions, loop_class(loops.qualnames[node], functions.classes))
    # a name bound to a function the script's own function returns (a schedule's closure) is no model
    closures = {n for n, callee in assignments.constructed.items()
                if callee in functions.by_name and _returned_closure(functions.by_name[callee]) is not None}
    definitions.names |= closures
    steppers = {*optimizers, *(r for r, _ in body.step), *(r for r, _, _ in body.scaler_steps),
                *(name for name, _ in body.step_calls)}
    owner = assignments.params_owner.get(optimizer) or next((m for _, m in body.manual_updates if m), None)
    models, calls = _models(body, assignments, definitions, steppers, owner)
    model = models[0] if models else None
    if isinstance(node, cst.For):
        batch = target_names(node.target)
        iterated = dotted(node.iter.func) if isinstance(node.iter, cst.Call) else ""
        if iterated == "enumerate":
            batch = batch[1:]  # drop the counter
        elif iterated == "range":
            batch = _assigned_before_step(node, models)  # a counted loop: the inputs are picked in its body
    else:
        batch = body.assigned_from_next
    outside = [Outside(line, code, reason) for line, code, reason in body.outside]
    if scheduler:
        line = next(line for r, line in body.step if r == scheduler)
        outside.append(Outside(line, f"{scheduler}.step", "the LR schedule changes a Python float: keep the "
                                                            "optimizer outside the graph or use a tensor LR"))
    if body.lr_set:
        outside.append(Outside(body.lr_set[0], "param_group['lr'] = ...", "the LR schedule changes a Python "
                                                                          "float: keep the optimizer outside the graph"))
    elif lr_calls:
        outside.append(Outside(lr_calls[0][0], f"{lr_calls[0][1]}(...)", "it sets param_group['lr']: the LR schedule "
                                                                         "changes a Python float: keep the optimizer "
                                                                         "outside the graph"))
    body.lr_set = sorted(body.lr_set + [line for line, _ in lr_calls])
    start, end = positions[node].start.line, positions[node].end.line
    spec = StepSpec(str(path), "for" if isinstance(node, cst.For) else "while", start, end, function, model,
                    optimizer, loss, batch, scheduler, scaler, body.autocast, body.clip_grad,
                    sorted(outside, key=lambda o: o.line))
    spec.step_name, spec.optimizers, spec.models, spec.calls = step, optimizers, models, calls
    spec.lr_set = body.lr_set[0] if body.lr_set else None
    spec.step_call = body.step_calls[0][1] if body.step_calls else None
    spec.through_calls = body.through_calls
    spec.manual_update = body.manual_updates[0][0] if body.manual_updates and not optimizers else None
    spec.backwards = 0 if None in body.backward_times else sum(body.backward_times)
    return spec


def _fixed_count(loop) -> Optional[int]:
    """How often a loop inside the step runs an iteration, where the source fixes it (``for _ in
    range(4)``), else None (a while loop, a loop over data)."""
    if not (isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call) and dotted(loop.iter.func) == "range"):
        return None
    bounds = [arg.value for arg in loop.iter.args]
    if not bounds or len(bounds) > 2 or not all(isinstance(b, cst.Integer) for b in bounds):
        return None
    values = [int(b.value, 0) for b in bounds]
    return max(0, values[-1] - (values[0] if len(values) == 2 else 0))


def _assigned_before_step(loop, models: list) -> list:
    """Names the loop body assigns before its first statement that calls anything
    step-like (the model, backward, zero_grad): ``x, y = batches[i % n]``."""
    names = []
    for statement in loop.body.body:
        if not isinstance(statement, cst.SimpleStatementLine) or not all(isinstance(b, cst.Assign)
                                                                         for b in statement.body):
            break
        if calls_in(statement, lambda c: dotted(c.func) in models
                    or dotted(c.func).endswith((".backward", ".zero_grad", ".step"))):
            break
        for assign in statement.body:
            for target in assign.targets:
                names += target_names(target.target)
    return list(dict.fromkeys(names))   # `x, y = ...` then `x, y = x.to(device), y.to(device)`: named once


def _span(positions, node) -> int:
    p = positions[node]
    return p.end.line - p.start.line


def _is_scheduler(name: str, assignments: _Assignments) -> bool:
    """Built by an LR scheduler (``lr_scheduler.StepLR``, an imported ``ReduceLROnPlateau`` or
    ``OneCycleLR``: torch's end in ``LR`` or name a plateau, restarts or a chain; Hugging Face's
    ``get_linear_schedule_with_warmup``), or named so."""
    callee = assignments.constructed.get(name, "")
    last = callee.rsplit(".", 1)[-1]
    return (any(h in callee for h in SCHEDULER_HINTS) or "schedule" in callee.lower() or last.endswith("LR")
            or last in ("ReduceLROnPlateau", "CosineAnnealingWarmRestarts") or "sched" in name.lower())


def _schedulers_given_a_value(body: _LoopBody, assignments: _Assignments) -> None:
    """A ``.step(value)`` call was read as ``scaler.step(optimizer)``; a scheduler's
    (``scheduler.step(epoch + i / iters)``, ReduceLROnPlateau's ``scheduler.step(val_loss)``)
    is a scheduler step: the LR changes there, and its argument is no optimizer."""
    given = [s for s in body.scaler_steps if _is_scheduler(s[0], assignments)]
    body.scaler_steps = [s for s in body.scaler_steps if s not in given]
    body.step += [(receiver, line) for receiver, _, line in given]


def _steps_of_other_objects(body: _LoopBody, assignments: _Assignments) -> None:
    """A ``.step(value)`` read as ``scaler.step(optimizer)`` whose object the script builds as
    neither a GradScaler nor an optimizer (an environment's ``state, reward, ... =
    env.step(action)``): no step of the training at all. Left as read where the script does not
    build it (a parameter, an attribute) or where its name says scaler. REINFORCE's loop read
    ``action`` as its optimizer, and was refused for "building it again" at every step."""
    def other(receiver: str) -> bool:
        callee = assignments.constructed.get(receiver)
        return (callee is not None and "scaler" not in receiver.lower() and "Scaler" not in callee
                and receiver not in assignments.params_owner and "optim" not in callee.lower())

    body.scaler_steps = [s for s in body.scaler_steps if not other(s[0])]


class _FunctionDefs(cst.CSTVisitor):
    """name -> FunctionDef of every function the script defines, nested ones too, but not its
    methods (called through their object, never by a bare name: a method ``train`` does not
    stand for the script's function ``train``); where two share a name, the one a bare call
    there runs: the last defined at module level (which rebinds the name), else the first
    nested one. class name -> {method name -> FunctionDef}."""

    def __init__(self):
        self.by_name = {}
        self.classes = {}
        self._methods = set()
        self._module_level = set()
        self._depth = 0   # functions and classes the visit is inside

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        name = node.name.value
        if self._depth == 0:
            self.by_name[name] = node
            self._module_level.add(name)
        elif id(node) not in self._methods and name not in self._module_level:
            self.by_name.setdefault(name, node)
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._depth -= 1

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._depth -= 1

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        methods = {n.name.value: n for n in node.body.body if isinstance(n, cst.FunctionDef)}
        self.classes[node.name.value] = methods
        self._methods.update(map(id, methods.values()))
        self._depth += 1

    def callee(self, name: str, assignments: "_Assignments", cls: Optional[str] = None) -> tuple:
        """(FunctionDef, the object it is a method of, or None) that a call of ``name`` runs: a
        function of the script, the ``__call__`` of an object built from one of its classes
        (timm's ``loss_scaler(loss, optimizer)``), or such an object's method
        (``lr_scheduler.step_update(...)``), or, called on ``self`` in a method of the class
        ``cls``, that class's method (a Trainer's ``self.train_step(batch)``); (None, None) otherwise."""
        if name in self.by_name and "." not in name:
            return self.by_name[name], None
        obj, _, method = name.rpartition(".") if "." in name else (name, "", "__call__")
        if obj == "self" and cls in self.classes:
            methods = self.classes[cls]
        else:
            methods = self.classes.get(assignments.constructed.get(obj, "").rpartition(".")[2], {})
        return (methods[method], obj) if method in methods else (None, None)


def loop_class(qualname: str, classes: dict) -> Optional[str]:
    """The class whose method holds a loop (``Trainer`` of ``Trainer.fit``), where ``self`` in
    the loop is one of its objects; None for a loop in a function or at the top level."""
    parts = qualname.split(".")
    return parts[-2] if len(parts) >= 2 and parts[-2] in classes and parts[-1] in classes[parts[-2]] else None


def script_functions(module: cst.Module) -> dict:
    """name -> FunctionDef that a bare call of the name in ``module`` runs (``_FunctionDefs``):
    the map discover follows calls through, and patch's data-flow rules too."""
    functions = _FunctionDefs()
    module.visit(functions)
    return functions.by_name


def _returned_closure(function: cst.FunctionDef) -> Optional[cst.FunctionDef]:
    """The function ``function`` defines inside itself and returns (open_clip's
    ``cosine_lr(optimizer, ...)`` returns its ``_lr_adjuster``), or None."""
    inner = {n.name.value: n for n in function.body.body if isinstance(n, cst.FunctionDef)}
    returned = [r.value for r in nodes(function.body, cst.Return)]
    return next((inner[dotted(v)] for v in returned if isinstance(v, cst.Name) and v.value in inner), None)


def _sets_lr(function: cst.FunctionDef, functions: dict, depth: int = 2) -> bool:
    """Whether ``function``, or a function of the script it calls (``depth`` deep), sets a
    param group's learning rate by hand."""
    targets = [t.target for a in nodes(function, cst.Assign) for t in a.targets]
    targets += [a.target for a in nodes(function, cst.AugAssign)]
    if any(_is_lr_key(t) for t in targets):
        return True
    called = [functions.get(dotted(c.func)) for c in nodes(function.body, cst.Call)] if depth else []
    return any(f is not None and f is not function and _sets_lr(f, functions, depth - 1) for f in called)


def _lr_set_through_functions(body: _LoopBody, assignments: _Assignments, functions: dict,
                              cls: Optional[str] = None) -> list:
    """(line, name) of the loop's calls of the script's functions that set the learning rate by hand:
    MAE's ``adjust_learning_rate(optimizer, epoch)``, or a closure built before the loop
    (open_clip's ``scheduler = cosine_lr(...)``, then ``scheduler(step)``)."""
    lines = []
    for name, line in body.calls:
        function, _ = functions.callee(name, assignments, cls)
        made_by = functions.by_name.get(assignments.constructed.get(name, ""))
        if function is None and made_by is not None:
            function = _returned_closure(made_by)
        if function is not None and _sets_lr(function, functions.by_name):
            lines.append((line, name))
    return lines


def _steps_inside_calls(body: _LoopBody, assignments: _Assignments, functions: _FunctionDefs, positions,
                        cls: Optional[str] = None) -> None:
    """A call of the script's own code that runs the backward and the optimizer step (timm's
    and MAE's ``loss_scaler(loss, optimizer, parameters=...)``, whose ``__call__`` does
    ``scale(loss).backward()``, then the scaler's step): its backward, steps and zero_grad count
    as the loop's, with the names the call passes in place of its parameters."""
    for call in body.call_nodes:
        name = dotted(call.func)
        function, obj = functions.callee(name, assignments, cls)
        if function is None or not calls_backward(function.body) or any(
                calls_backward(loop.body) for loop in nodes(function.body, (cst.For, cst.While))):
            continue   # a function that trains a whole epoch (the MNIST example's train()) has its own loop
        inner = _LoopBody(positions)
        function.body.visit(inner)
        params = [p.name.value for p in function.params.params][1 if obj else 0:]
        given = dict(zip(params, [dotted(a.value) for a in call.args if not a.keyword and not a.star]))
        given.update({a.keyword.value: dotted(a.value) for a in call.args if a.keyword})
        if obj:
            given["self"] = obj

        def outer(inner_name: str, given=given) -> str:
            root, dot, rest = inner_name.partition(".")
            return (given[root] + dot + rest) if given.get(root) else inner_name

        line = positions[call].start.line
        body.backward += [(outer(r), line) for r, _ in inner.backward]
        body.backward_times += inner.backward_times
        body.through_calls = True
        if not (inner.step or inner.scaler_steps):
            # a helper that runs the backward alone (the step in the loop, or one call deeper,
            # a scaler's own `_apply`): the loop trains, and no validation loop is tuned in its place
            continue
        body.step += [(outer(r), line) for r, _ in inner.step]
        body.scaler_steps += [(outer(r), outer(o), line) for r, o, _ in inner.scaler_steps]
        body.zero_grad += [outer(r) for r in inner.zero_grad]
        body.clip_grad = body.clip_grad or inner.clip_grad
        body.with_grad += [(outer(n), line) for n, _ in inner.with_grad]   # a model called twice in it counts twice
        # MAE's `loss_scaler(..., update_grad=(i + 1) % accum_iter == 0)` steps under an `if`:
        # gradient accumulation, which the loop's own statements must not be read as stepping
        held = [s for s in function.body.body if isinstance(s, (cst.If, cst.For, cst.While, cst.Try))]
        if not any(calls_in(s, lambda c: isinstance(c.func, cst.Attribute) and c.func.attr.value == "step")
                   for s in held):
            body.step_calls.append((name, line))


def _optimizers(body: _LoopBody, assignments: _Assignments) -> list:
    """The receivers of .step() that are optimizers, in the order they step: constructed from
    an optim module, given parameters, zeroed in the loop, or stepped through a GradScaler.
    A GAN's iteration steps two."""
    found = [optimizer for _, optimizer, _ in body.scaler_steps if optimizer]
    for receiver, _ in body.step:
        if _is_scheduler(receiver, assignments):
            continue
        callee = assignments.constructed.get(receiver, "")
        if (callee.startswith(OPTIMIZER_MODULES) or receiver in assignments.params_owner
                or receiver in body.zero_grad or "opt" in receiver.lower()):
            found.append(receiver)
    return list(dict.fromkeys(found))


def _inference_loop(path, wrapper, positions, loops, bodies, assignments) -> Optional[StepSpec]:
    """The innermost loop that calls a model without grad: inside ``with torch.no_grad()`` /
    ``torch.inference_mode()`` (around the loop or in its body) or a function decorated so."""
    parents = wrapper.resolve(ParentNodeProvider)
    models = {name for name, code in assignments.sources.items() if any(h in code for h in MODEL_HINTS)}
    found = []
    for node, function in loops.loops:
        callable_models = models | _parameters_of_enclosing_function(node, parents)
        called = [name for name, _ in bodies[node].calls if name in callable_models]
        if called and (_under_no_grad(node, parents) or _has_no_grad(node.body)):
            found.append((node, function, called[0]))
    if not found:
        return None
    node, function, model = min(found, key=lambda f: _span(positions, f[0]))
    batch = target_names(node.target) if isinstance(node, cst.For) else []
    start, end = positions[node].start.line, positions[node].end.line
    return StepSpec(str(path), "for" if isinstance(node, cst.For) else "while", start, end, function, model,
                    "", "", batch, kind="inference")


def _parameters_of_enclosing_function(node, parents) -> set:
    """``model`` in ``def serve(model, requests)``: a model handed to the function."""
    while node in parents:
        node = parents[node]
        if isinstance(node, cst.FunctionDef):
            return {p.name.value for p in node.params.params}
    return set()


def _is_no_grad(expression) -> bool:
    call = expression.func if isinstance(expression, cst.Call) else expression
    return dotted(call).split(".")[-1] in NO_GRAD


def _under_no_grad(node, parents) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, cst.With) and any(_is_no_grad(item.item) for item in node.items):
            return True
        if isinstance(node, cst.FunctionDef):
            return any(_is_no_grad(d.decorator) for d in node.decorators)
    return False


def _has_no_grad(body) -> bool:
    found = []

    class Finder(cst.CSTVisitor):
        def visit_With(self, node: cst.With) -> None:
            if any(_is_no_grad(item.item) for item in node.items):
                found.append(node)

    body.visit(Finder())
    return bool(found)
