"""Rewrites the user's training loop to use one capture scope, with libcst so that comments
and formatting survive; the result is checked before anyone sees it.

Scopes of a training loop: ``full_iteration`` (the step's statements become a function
captured whole), ``fwd_bwd`` (the model's forward and backward graphed), ``submodule`` (each
top-level child graphed), ``compile`` (``torch.compile(mode="reduce-overhead")``). Of an
inference loop: ``forward`` (a graph per batch-size bucket) and ``compile``.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import libcst as cst
from pyflakes.checker import Checker
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from advisor.errors import CgAdviseError
from advisor.sourcefile import SourceFile, read_source

from .discover import StepSpec, _Assignments, calls_in, discover, dotted, host_call, target_names
from .search import scopes_for
from .templates import HELPERS

PATCH_SCOPES = ("submodule", "fwd_bwd", "full_iteration", "compile", "forward")
CAPTURABLE_OPTIMIZERS = ("Adam", "AdamW", "NAdam", "RAdam", "Adamax", "ASGD", "Adagrad", "Rprop", "RMSprop", "Adadelta")


class PatchRefused(CgAdviseError):
    pass


@dataclass
class Patch:
    path: str
    scope: str
    original: str
    patched: str
    source: Optional[SourceFile] = None   # how the file was read: encoding, BOM, bytes

    @property
    def patched_bytes(self) -> bytes:
        """The patched file as it is written: the original's encoding, BOM and line endings."""
        return self.source.encode(self.patched) if self.source else self.patched.encode("utf-8")

    def diff(self, relpath: Optional[str] = None) -> str:
        """A unified diff whose lines keep the file's own line endings (CRLF stays CRLF), so
        that `git apply` and `patch -p1` accept it on the file as it is."""
        name = relpath or self.path
        as_in_file = self.source.diff_text if self.source else str
        lines = difflib.unified_diff(as_in_file(self.original).splitlines(keepends=True),
                                     as_in_file(self.patched).splitlines(keepends=True), f"a/{name}", f"b/{name}")
        return "".join(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n"
                       for line in lines)

    def diff_bytes(self, relpath: Optional[str] = None) -> bytes:
        """The diff in the file's encoding: a latin-1 script's diff applies to its bytes."""
        text = self.diff(relpath)
        return text.encode(self.source.encoding if self.source else "utf-8", errors="surrogateescape")


def make_patch(path, scope: str, spec: Optional[StepSpec] = None, step: Optional[str] = None) -> Patch:
    path = Path(path)
    if scope not in PATCH_SCOPES:
        raise PatchRefused(f"unknown scope {scope!r} (choose from {', '.join(PATCH_SCOPES)})")
    source = read_source(path)
    original = source.text
    spec = spec or discover(path, original, step)
    module = _parse(path, original)
    if module.code != original:
        raise PatchRefused(f"{path}: libcst does not round-trip this file exactly; refusing to rewrite it")
    patched = _same_line_endings(original, _Rewriter(spec, scope, path).apply(module).code)
    check(path, original, patched)
    return Patch(str(path), scope, original, patched, source)


def _same_line_endings(original: str, patched: str) -> str:
    """A CRLF file stays CRLF throughout: the inserted helper's multi-line strings carry LF."""
    if "\r\n" in original and original.count("\r\n") == original.count("\n"):
        return patched.replace("\r\n", "\n").replace("\n", "\r\n")
    return patched


def _parse(path, text: str) -> cst.Module:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        raise PatchRefused(f"{path}: not a Python script ({error.message} at line {error.raw_line})") from None


def check(path, original: str, patched: str) -> None:
    """The rewrite parses, compiles and changes something; otherwise nothing is shown."""
    if patched == original:
        raise PatchRefused(f"{path}: the rewrite changed nothing")
    try:
        compile(patched, str(path), "exec")
    except SyntaxError as error:
        raise PatchRefused(f"{path}: the rewrite does not compile ({error.msg} at line {error.lineno}); "
                           "refusing it (please report this)") from None
    before = {name for name, _ in _unbound_names(original)}
    for name, line in _unbound_names(patched):
        if name not in before:
            raise PatchRefused(f"{path}: the rewrite would leave {name!r} unbound at line {line}; "
                               "refusing it (please report this)")


UNBOUND_MESSAGES = ("UndefinedName", "UndefinedLocal", "UndefinedExport")


def _unbound_names(text: str) -> list:
    """(name, line) for every name pyflakes finds read where nothing binds it. A rewrite that
    moves a binding into the captured function (a loss read after the loop) shows up here as a
    name the original bound and the rewrite does not: the NameError the user would hit at the
    end of training, found before the diff is shown."""
    try:
        found = Checker(ast.parse(text), "patched").messages
    except SyntaxError:
        return []
    return [(m.message_args[0], m.lineno) for m in found if type(m).__name__ in UNBOUND_MESSAGES]


# -- the rewrite ------------------------------------------------------------------------
def _is_method(call: cst.Call, receiver: Optional[str], method: str) -> bool:
    func = call.func
    return (isinstance(func, cst.Attribute) and func.attr.value == method
            and (receiver is None or dotted(func.value) == receiver))


def _has_sync(node) -> bool:
    return bool(calls_in(node, lambda c: host_call(c) is not None))


def _names_read(node, skip=()) -> set:
    """Names in ``node`` (targets included), not descending into the nodes in ``skip``."""
    names = set()
    skipped = {id(n) for n in skip}

    class Reader(cst.CSTVisitor):
        def on_visit(self, node) -> bool:
            return id(node) not in skipped and super().on_visit(node)

        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `opt.step`: `step` is an attribute, not a name read
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)  # `f(lr=x)`: `lr` is a keyword, not a name read
            return False

    node.visit(Reader())
    return names


def _reads_before_binding(statements) -> list:
    """(name, statement) for names each simple statement reads, in source order, before it
    binds them: ``h = rnn(x, h)`` reads ``h``; ``loss = f(out)`` does not read ``loss``."""
    found = []

    class Lines(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, line) -> bool:
            for small in line.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    read = _names_read(small.value)
                else:
                    read = _names_read(small)   # `n += 1` reads n
                found.extend((name, small) for name in sorted(read))
                found.extend((name, None) for name in sorted(_names_assigned(small)))
            return False

    for statement in statements:
        statement.visit(Lines())
    return found


def _names_assigned(statement, paths: bool = False) -> set:
    """Plain names the statement binds; with ``paths``, attribute paths too: ``logits,
    self.loss = model(x, y)`` binds ``logits`` and ``self.loss`` (minGPT's Trainer keeps its
    loss on itself)."""
    names = set()
    targets = target_names if paths else _target_names

    class Writer(cst.CSTVisitor):
        def visit_AssignTarget(self, target: cst.AssignTarget) -> None:
            names.update(targets(target.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            names.update(targets(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            names.update(targets(node.target))

    statement.visit(Writer())
    return names


def _names_rebound(node, skip=()) -> set:
    """Names bound anywhere inside ``node`` (assignments, loop targets, ``with ... as``),
    not descending into the nodes in ``skip``."""
    names = set()
    skipped = {id(n) for n in skip}

    class Binder(cst.CSTVisitor):
        def on_visit(self, node) -> bool:
            return id(node) not in skipped and super().on_visit(node)

        def visit_SimpleStatementLine(self, line) -> bool:
            names.update(_names_assigned(line))
            return False

        def visit_For(self, node: cst.For) -> None:
            names.update(_target_names(node.target))

        def visit_AsName(self, node: cst.AsName) -> None:
            names.update(_target_names(node.name))

    node.visit(Binder())
    return names


def _target_names(node) -> list:
    """Plain names a target binds (``self.x = ...`` binds no local name)."""
    return [name for name in target_names(node) if "." not in name]


STORE_METHODS = ("append", "appendleft", "extend", "insert", "add", "put", "put_nowait")
VIEW_METHODS = ("detach", "view", "view_as", "reshape", "squeeze", "flatten")


def _keeps_reference(statements, names: set, skip=()) -> bool:
    """Whether the statements keep one of ``names`` (or a view of it) beyond the statement:
    ``losses.append(loss.detach())``, ``best = loss``, ``(step, loss)``. Reading a value
    (``loss.item()``, ``total += loss``) makes a new one and keeps nothing."""

    def aliased(expr) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in names
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in VIEW_METHODS:
            return aliased(expr.func.value)
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return aliased(expr.value)
        return False

    found = []
    skipped = {id(n) for n in skip}

    class Keeper(cst.CSTVisitor):
        def on_visit(self, node) -> bool:
            return id(node) not in skipped and super().on_visit(node)

        def visit_Assign(self, node: cst.Assign) -> None:
            found.append(aliased(node.value))

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in STORE_METHODS:
                found.extend(aliased(arg.value) for arg in node.args)

        def visit_Element(self, node) -> None:   # list, tuple and set items
            found.append(aliased(node.value))

        def visit_DictElement(self, node: cst.DictElement) -> None:
            found.append(aliased(node.value))

    for statement in statements:
        statement.visit(Keeper())
    return any(found)


HOST_VALUE_CALLS = ("float", "str", "repr", "format", "time.time", "time.perf_counter", "time.monotonic")


def _host_value_binding(statements, name: str):
    """The assignment in ``statements`` that binds ``name`` to a plain Python value (a number
    or string literal, an f-string, ``float(...)``, ``time.time()``), else None."""
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            value = node.value
            host = (isinstance(value, (cst.Float, cst.Integer, cst.SimpleString, cst.FormattedString,
                                       cst.ConcatenatedString))
                    or isinstance(value, cst.Call) and dotted(value.func) in HOST_VALUE_CALLS)
            if host and any(name in _target_names(t.target) for t in node.targets):
                found.append(node)

    for statement in statements:
        statement.visit(Finder())
    return found[0] if found else None


def _is_bookkeeping(statement, later) -> bool:
    """A statement that calls nothing and feeds nothing later in the step (``n += 1``)."""
    if not isinstance(statement, cst.SimpleStatementLine) or calls_in(statement, lambda c: True):
        return False
    assigned = _names_assigned(statement)
    read_later = set().union(*map(_names_read, later))
    return bool(assigned) and not (assigned & read_later)


def _functions(module) -> dict:
    """name -> FunctionDef of every function the script defines (methods by their name too)."""
    return {n.name.value: n for n in _nodes(module, (cst.FunctionDef,))}


def _backward_passes(loop) -> int:
    """How many backward() calls one iteration of ``loop`` makes, at least: a backward inside a
    loop in the body (micro-steps) counts as two."""
    count = len(calls_in(loop.body, lambda c: _is_method(c, None, "backward")))
    inner = [n for n in _nodes(loop.body, (cst.For, cst.While))
             if calls_in(n.body, lambda c: _is_method(c, None, "backward"))]
    return count + len(inner)


def _nodes(node, types) -> list:
    found = []

    class Finder(cst.CSTVisitor):
        def on_visit(self, n) -> bool:
            if isinstance(n, types):
                found.append(n)
            return True

    node.visit(Finder())
    return found


HOST_DATA_FUNCTIONS = ("next", "iter", "open", "input")
HOST_DATA_MODULES = ("np.", "numpy.", "random.", "os.", "pd.", "pandas.")


def _host_data_call(statements, functions: dict):
    """The first call in ``statements`` that reads data on the host whose value changes from
    one iteration to the next (``next(it)``, ``np.random...``, ``random...``, a file), also one
    level into the script's own functions they call (``get_batch()``, where a ``.item()`` counts
    too); inside a captured graph it would run once, at capture, and every replay would reuse
    its first value (or the capture fails on the sync)."""
    def host(call):
        name = dotted(call.func)
        return name in HOST_DATA_FUNCTIONS or name.startswith(HOST_DATA_MODULES)

    def host_or_sync(call):   # in a function the step calls, a sync cannot move out either
        return host(call) or host_call(call) is not None

    for statement in statements:
        for call in calls_in(statement, lambda c: True):
            name = dotted(call.func)
            if host(call):
                return call, name
            inner = [c for c in _calls_through(functions[name], functions) if host_or_sync(c)] if name in functions else []
            if inner:
                return call, f"{name}() (it calls {dotted(inner[0].func)})"
    return None


def _calls_through(node, functions: dict, depth: int = 2) -> list:
    """The calls inside ``node``, and inside the script's functions it calls, ``depth`` deep."""
    found = []
    for call in calls_in(node, lambda c: True):
        found.append(call)
        name = dotted(call.func)
        if depth and name in functions and functions[name] is not node:
            found += _calls_through(functions[name], functions, depth - 1)
    return found


GPU_METHODS = ("backward", "step", "zero_grad", "train", "eval", "requires_grad_", "register_hook")


def _is_host_method_call(statement, protected: set) -> bool:
    """``top1.update(acc1[0], n)``, ``pbar.set_postfix(...)``, ``progress.display(i)``: a call
    of a method of a Python object, as a statement of its own. Inside a graph it would run once,
    at capture (the ImageNet example's meters froze); after the replay it runs every time. Not
    a tensor's in-place op (``label.fill_(...)``, a name ending in ``_``), nor a call on a
    model, optimizer, scaler or scheduler, nor a torch function."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.Call)):
        return False
    func = statement.body[0].value.func
    if not isinstance(func, cst.Attribute) or func.attr.value.endswith("_") or func.attr.value in GPU_METHODS:
        return False
    receiver = dotted(func.value)
    root = receiver.split(".")[0]
    return bool(receiver) and receiver not in protected and root not in {"torch", "nn", "F", "self"} | protected


def _is_loading(statement, before, functions) -> bool:
    """A statement in the middle of the step that picks or builds an input (``noise =
    noise_bank[i]``, ``b = x.size(0)``) from nothing the step computed, and binds nothing the
    step read before it: it runs before the replay, and what it binds is an input. In the graph
    it would make the iteration's counter an input that differs on every replay."""
    if not isinstance(statement, cst.SimpleStatementLine) or not _names_assigned(statement):
        return False
    if not all(_is_loading_call(c, functions) for c in calls_in(statement, lambda c: True)):
        return False
    made_before = set().union(*map(_names_assigned, before))
    read_before = set().union(*map(_names_read, before))
    return not _reads(statement) & made_before and not _names_assigned(statement) & read_before


def _is_prefetch(statement, before, after) -> bool:
    """A statement in the middle of the step that fetches what the next iteration reads
    (nanoGPT's ``X, Y = get_batch('train')`` after the forward): it binds a name the step read
    before it, reads nothing the step computed, and nothing after it in the step reads what it
    binds. Inside a graph it would replay one batch forever; after the replay it does what it
    did, and the names it binds are the next replay's inputs."""
    if calls_in(statement, lambda c: _is_method(c, None, "backward") or _is_method(c, None, "step")):
        return False
    binds = _names_assigned(statement)
    read_before = set().union(*map(_names_read, before))
    made_before = set().union(*map(_names_assigned, before))
    read_after = set().union(*map(_names_read, after))
    return bool(binds & read_before) and not binds & read_after and not _reads(statement) & made_before


def _is_zero_grad(statement, receivers) -> bool:
    """``optimizer.zero_grad(...)`` or ``model.zero_grad()``: the helper clears gradients
    itself (to None before capture, so the graph's backward writes rather than adds)."""
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.Call)
            and any(_is_method(statement.body[0].value, r, "zero_grad") for r in receivers if r))


# calls that fetch, build or move a batch: a statement made only of these stays before the step
LOADING_FUNCTIONS = ("next", "iter", "dict", "list", "tuple", "zip", "len", "range", "enumerate", "min", "max", "int")
LOADING_METHODS = ("to", "cuda", "items", "values", "keys", "get", "float", "half", "double", "long", "int",
                   "bfloat16", "pin_memory", "randn", "rand", "randint", "randperm", "zeros", "ones", "arange",
                   "from_numpy", "as_tensor", "view", "reshape", "contiguous", "size", "unsqueeze", "squeeze",
                   "stack", "cat", "is_available", "device_count")


def _is_loading_call(call: cst.Call, functions: Optional[dict] = None, depth: int = 2) -> bool:
    """A call that fetches, builds, moves or reshapes a batch; with ``functions`` (the script's
    own), also a call of one whose calls all are (the word-language-model example's
    ``get_batch(source, i)``, slicing one long tensor), two calls deep."""
    if isinstance(call.func, cst.Name):
        name = call.func.value
        if functions and depth and name in functions and name not in LOADING_FUNCTIONS:
            return all(_is_loading_call(c, functions, depth - 1) for c in calls_in(functions[name].body, lambda c: True))
        return name in LOADING_FUNCTIONS
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in LOADING_METHODS


def _read_first(statements) -> set:
    """Names the statements read before they bind them."""
    bound, found = set(), set()
    for name, small in _reads_before_binding(statements):
        if small is None:
            bound.add(name)
        elif name not in bound:
            found.add(name)
    return found


def _reads(statement) -> set:
    """Names a statement reads (``loss = f(out)`` reads ``out``, not ``loss``)."""
    if isinstance(statement, cst.SimpleStatementLine):
        return {name for name, small in _reads_before_binding([statement]) if small is not None}
    return _names_read(statement)


def _step_start(body, end: int, is_zero_grad, functions: Optional[dict] = None) -> int:
    """The first statement of the step: the earliest one whose values flow into the
    statement at ``end`` (the optimizer step, or the backward) or into a backward, whatever
    the order of zero_grad, forward, loss and backward. Batch loading (``next(it)``,
    ``x.to(device)``, a dict of moved tensors) is not the step: what it binds becomes the
    step's inputs. A statement (simple, or a block such as ``try: batch = next(it) except
    StopIteration: ...``) counts as loading when it calls only such functions and reads
    nothing the step computed before it."""
    computed, loading = set(), []
    for statement in body[:end + 1]:
        is_loading = (not is_zero_grad(statement)   # a `try: batch = next(it)` block is loading too
                      and all(_is_loading_call(c, functions) for c in calls_in(statement, lambda c: True))
                      and not _reads(statement) & computed)
        loading.append(is_loading)
        if not is_loading:
            computed |= _names_assigned(statement)
    needed, start = set(), end
    for i in range(end, -1, -1):
        statement = body[i]
        if is_zero_grad(statement):
            continue
        backward = calls_in(statement, lambda c: _is_method(c, None, "backward"))
        if i == end or backward or _names_assigned(statement, paths=True) & needed:
            if loading[i]:
                continue
            needed |= _reads(statement) | _paths_read(statement)
            start = i
    return start


def _paths_read(statement) -> set:
    """Attribute paths a statement mentions, with their prefixes: ``self.loss.backward()``
    gives ``self.loss`` and ``self.loss.backward``."""
    paths = set()

    class Reader(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            path = dotted(node)
            while "." in path:
                paths.add(path)
                path = path.rpartition(".")[0]

    statement.visit(Reader())
    return paths


class _Rewriter:
    def __init__(self, spec: StepSpec, scope: str, path: Path):
        self.spec, self.scope, self.path = spec, scope, path
        self.optimizer_outside = False

    def refuse(self, why: str) -> PatchRefused:
        return PatchRefused(f"{self.path}:{self.spec.line}: cannot apply {self.scope}: {why}")

    def apply(self, module: cst.Module) -> cst.Module:
        wrapper = MetadataWrapper(module)
        positions = wrapper.resolve(PositionProvider)
        loop = next((n for n in positions if isinstance(n, (cst.For, cst.While))
                     and positions[n].start.line == self.spec.line), None)
        if loop is None:
            raise self.refuse("the training loop found by discovery is not in this file any more")
        parents = wrapper.resolve(ParentNodeProvider)
        self.positions, self.parents = positions, parents
        self.declared = (None, [])   # (function, names bound to None at its start)
        outer = self._outermost_loop(parents, loop)
        allowed = scopes_for(self.spec.kind)
        if self.scope not in allowed:
            raise self.refuse(f"this is {'an inference' if self.spec.kind == 'inference' else 'a training'} loop; "
                              f"its scopes are {', '.join(allowed)}")
        self.module = wrapper.module
        if self.scope == "full_iteration":
            scope = self._enclosing_scope(parents, loop) or wrapper.module
            before, new_loop = self._full_iteration(loop, outer, scope, positions)
        else:
            before, new_loop = self._module_scope(loop)
        transformer = _Splice(loop, new_loop, outer, before, self.declared)
        module = wrapper.module.visit(transformer)
        if not transformer.inserted:
            raise self.refuse("could not place the setup code before the loop")
        if self.scope == "full_iteration" and not self.optimizer_outside:
            module = self._capturable_optimizer(module)
        if self.scope != "compile":
            # autocast inside a captured region must not cache casts, and neither must an
            # autocast context built before the loop (nanoGPT's `ctx = torch.amp.autocast(...)`)
            # must not cache casts either: make_graphed_callables refuses one that does
            module = _autocast_without_cache(module)
        return _add_helper(module, self.scope) if self.scope in HELPERS else module

    def _outermost_loop(self, parents, loop):
        """The loop to put setup before: the outermost loop around ours in the same block."""
        outer, node = loop, loop
        while node in parents:
            node = parents[node]
            if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
                break
            if isinstance(node, (cst.For, cst.While)):
                outer = node
        return outer

    @staticmethod
    def _enclosing_scope(parents, node):
        """The function the loop is in (None at module level): where its names live."""
        while node in parents:
            node = parents[node]
            if isinstance(node, cst.FunctionDef):
                return node
        return None

    # -- compile, fwd_bwd, submodule: setup before the loop --------------------------------
    def _models(self, loop) -> list:
        """The models this scope applies to: every module the iteration calls with grad (data
        flow, not the optimizer's constructor). A graphed forward and backward keeps one call's
        activations, so a module called twice per iteration, or with keyword arguments, is
        left eager; compile takes them all."""
        spec = self.spec
        models = spec.models or ([spec.model] if spec.model else [])
        if not models:
            raise self.refuse("no model found: no module is called with grad in the loop, and the optimizer is "
                              "not built from <model>.parameters()")
        if self.scope == "compile":
            called = [m for m in models if calls_in(loop.body, lambda c, m=m: dotted(c.func) == m)]
            if not called:
                raise self.refuse(f"{models[0]} is not called in the loop itself (a function the loop calls runs "
                                  "it); compile replaces the loop's calls of the model")
            return called
        usable, why = [], []
        for model in models:
            if calls_in(loop.body, lambda c, m=model: dotted(c.func) == m and any(a.keyword or a.star for a in c.args)):
                why.append(f"{model} is called with keyword or ** arguments; a graphed forward takes positional "
                           "tensors (try --scope compile)")
            elif spec.calls.get(model, 1) > 1:
                why.append(f"{model} is called more than once per iteration; a graphed forward keeps the "
                           "activations of one call for its backward (try --scope full_iteration)")
            else:
                usable.append(model)
        if not usable:
            raise self.refuse(why[0])
        return usable

    def _module_scope(self, loop) -> tuple:
        """(setup before the loop, the loop) for compile, forward, fwd_bwd and submodule."""
        models = self._models(loop)
        # gradient accumulation (a step only every k iterations, micro-steps in a loop inside the
        # iteration, several backward passes): the graphed backward's gradients live in static buffers that the
        # next replay overwrites, so .grad must get a copy (found as a mismatch on the GPU); so
        # must gradients zeroed in place (set_to_none=False): .grad would be that very buffer,
        # and the next backward would add it to itself (doubled gradients, found on the GPU)
        zeroed_in_place = calls_in(loop.body, lambda c: _is_method(c, None, "zero_grad")
                                   and any(dotted(a.value) == "False" for a in c.args))
        accumulates = bool(zeroed_in_place) or self._step_is_conditional(list(loop.body.body), self._step_flags(loop))
        if self.scope == "compile" and accumulates and self.spec.kind != "inference":
            # torch.compile's CUDA graphs have the same buffers and no copy to ask for: on the GPU
            # backward failed with "accessing tensor output of CUDAGraphs that has been overwritten"
            raise self.refuse("gradients accumulate across backward calls (micro-steps, or zero_grad("
                              "set_to_none=False)): compile's CUDA graphs overwrite them on the next run; "
                              "use fwd_bwd, which copies them")
        if self.scope == "compile":
            # the loop calls a compiled alias; the model itself is not rebound, so code after the
            # loop (a checkpoint's state_dict) sees the module as it was, and a model that is a
            # global or a function's parameter needs no new local binding
            aliases = {m: _compiled_name(m) for m in models}
            code = "".join(f'{aliases[m]} = torch.compile({m}, mode="reduce-overhead")  # cg-advise: scope compile\n'
                           for m in models)
            return list(cst.parse_module(code).body), _marks_each_step(_call_through(loop, aliases))
        # several backward passes per step (micro-steps, a GAN's two losses) add into .grad as well
        accumulate = ", accumulate=True" if accumulates or _backward_passes(loop) > 1 else ""
        if self.scope == "forward":
            code = "".join(f"_cg_graph_inference({m})  # cg-advise: forward passes as CUDA graphs, one per "
                           "batch-size bucket\n" for m in models)
        elif self.scope == "fwd_bwd":
            code = "".join(f"_cg_graph_forward({m}{accumulate})  # cg-advise: forward and backward as CUDA graphs\n"
                           for m in models)
        else:
            code = "".join(f"for _cg_child in {m}.children():  # cg-advise: each top-level submodule as CUDA graphs\n"
                           f"    if any(p.requires_grad for p in _cg_child.parameters()):\n"
                           f"        _cg_graph_forward(_cg_child{accumulate})\n" for m in models)
        return list(cst.parse_module(code).body), loop

    def _step_flags(self, loop) -> list:
        """For each top-level statement of the loop body: does it step an optimizer, or hold the
        hand-written update (``for p in model.parameters(): p.data.add_(...)``)?"""
        steppers = {*self._optimizers(), *([self.spec.scaler] if self.spec.scaler else [])}
        manual = self.spec.manual_update

        def updates(statement) -> bool:
            where = self.positions[statement]
            return bool(manual) and where.start.line <= manual <= where.end.line

        return [bool(calls_in(s, lambda c: any(_is_method(c, r, "step") for r in steppers))) or updates(s)
                for s in loop.body.body]

    def _optimizers(self) -> list:
        return self.spec.optimizers or [o for o in [self.spec.optimizer] if o]

    def _step_is_conditional(self, body, is_step) -> bool:
        """No optimizer step at the body's top level, or one inside an if/for/with (the loop of
        a hand-written update, or a `with torch.no_grad():` around it, runs every iteration)."""
        def unconditional(statement) -> bool:
            if isinstance(statement, cst.SimpleStatementLine):
                return True
            return bool(self.spec.manual_update) and isinstance(statement, (cst.For, cst.With)) and not calls_in(
                statement, lambda c: _is_method(c, None, "step"))

        return not any(is_step) or not all(unconditional(body[i]) for i, s in enumerate(is_step) if s)

    # -- full_iteration: the step's statements become a captured function -----------------
    def _full_iteration(self, loop, outer, scope, positions):
        spec = self.spec
        body = list(loop.body.body)
        # a GradScaler checks for infs on the host and a scheduler (or `group["lr"] = lr`) changes a Python-float LR:
        # then forward, loss and backward are captured and the optimizer step stays eager
        # so does an optimizer that cannot step inside a graph (LBFGS, SparseAdam, a third-party
        # class we do not know): capturing its step failed as "optimizer-not-capturable"
        self.optimizer_outside = (bool(spec.scaler or spec.scheduler or spec.lr_set)
                                  or not self._optimizer_steps_in_graphs())
        optimizers = self._optimizers()
        is_step = self._step_flags(loop)
        if self._step_is_conditional(body, is_step):
            what = f"{spec.optimizer}.step()" if spec.optimizer else f"the update at line {spec.manual_update}"
            raise self.refuse(f"{what} runs conditionally (gradient accumulation?); a captured "
                              "iteration needs one step per loop iteration")
        end = len(is_step) - 1 - is_step[::-1].index(True)   # the last optimizer step: a GAN steps two
        if self.optimizer_outside:
            if len(optimizers) > 1:
                raise self.refuse(f"the optimizers {', '.join(optimizers)} step eagerly (a GradScaler, a scheduler "
                                  "or an optimizer that cannot be captured) between backward passes; one graph "
                                  "cannot hold the work around them")
            end = is_step.index(True)
            is_backward = [bool(calls_in(s, lambda c: _is_method(c, None, "backward"))) for s in body[:end]]
            if True not in is_backward:
                raise self.refuse("no backward() before the optimizer step at the loop's top level")
            end = len(is_backward) - 1 - is_backward[::-1].index(True)
            if isinstance(body[end], (cst.For, cst.While)):
                return self._micro_steps(loop, body, end, outer, scope, positions)
        return self._capture(loop, body, end, outer, scope, positions)

    def _micro_steps(self, loop, body, end, outer, scope, positions):
        """Gradient accumulation inside the iteration (nanoGPT: ``for micro_step in range(k)``
        with forward and backward, then one optimizer step): one micro-step is the graph,
        replayed k times, its backward adding into the gradients; the optimizer, the
        scaler and the user's zero_grad stay as they were."""
        micro = body[end]
        inner = list(micro.body.body)
        is_backward = [bool(calls_in(s, lambda c: _is_method(c, None, "backward"))) for s in inner]
        if not any(is_backward) or not all(isinstance(s, cst.SimpleStatementLine) for s, b in zip(inner, is_backward) if b):
            raise self.refuse(f"line {positions[micro].start.line}: the loop of micro-steps runs backward() inside "
                              "a block; a captured micro-step needs it at the loop's top level")
        if any(calls_in(s, lambda c: _is_method(c, None, "zero_grad")) for s in inner):
            raise self.refuse(f"line {positions[micro].start.line}: the loop of micro-steps zeroes gradients; "
                              "a captured micro-step adds into them")
        inner_end = len(is_backward) - 1 - is_backward[::-1].index(True)
        setup, new_micro = self._capture(micro, inner, inner_end, outer, scope, positions, accumulate=True)
        new_body = [new_micro if s is micro else s for s in body]
        return setup, loop.with_changes(body=loop.body.with_changes(body=new_body))

    def _capture(self, loop, body, end, outer, scope, positions, accumulate=False):
        """The statements of ``body`` that make the step ending at ``end`` become a captured
        function; ``loop`` (whose body is ``body``) calls its graph instead."""
        spec = self.spec
        optimizers = self._optimizers()
        is_zero_grad = lambda s: _is_zero_grad(s, (*optimizers, *spec.models, spec.model))  # noqa: E731
        functions = _functions(self.module)
        start = _step_start(body, end, is_zero_grad, functions)
        core, moved, hoisted, aliases = [], [], [], []
        window = body[start:end + 1]
        first_backward = next((i for i, s in enumerate(window) if calls_in(s, lambda c: _is_method(c, None, "backward"))),
                              len(window))
        protected = {*optimizers, *spec.models, spec.model, spec.scaler, spec.scheduler} - {None, ""}
        # the batch and whatever the loops bind outside the step reach the graph as copies: the
        # replay never changes them, so a host read of them (images.size(0)) can follow it
        given = set(spec.batch) | _names_rebound(outer, skip=window)
        for i, statement in enumerate(window):
            if is_zero_grad(statement):
                if i > first_backward:
                    core.append(statement)  # between two backward passes (a GAN's generator step) it matters
                continue
            if statement is not body[end] and _is_bookkeeping(statement, window[i + 1:]):
                moved.append(statement)  # Python-side state would run once, at capture: keep it live
                continue
            if statement is not body[end] and _is_prefetch(statement, window[:i], window[i + 1:]):
                moved.append(statement)  # the next batch, fetched on the host: after the replay, as an input
                continue
            if statement is not body[end] and _is_loading(statement, window[:i], functions):
                hoisted.append(statement)  # `noise = noise_bank[i]`: before the replay, as an input
                continue
            if _has_sync(statement) or _is_host_method_call(statement, protected):
                # a host read (`train_loss += loss.item()` between backward and step) moves after the
                # replay when nothing later in the step reads what it binds, and what it reads is
                # either made by the step (the replay hands it back), an input, or left alone by it
                others = [s for s in window if s is not statement]
                fed = _names_assigned(statement) & set().union(*map(_names_read, window[i + 1:]))
                made = set().union(*map(_names_assigned, others))
                touched = set().union(*map(_names_read, others)) - made - given
                sees = sorted(n for n in _names_read(statement) if n in touched)
                if statement is body[end] or fed or sees:
                    why = (f"it binds {', '.join(sorted(fed))}, which the step reads" if fed else
                           f"it reads {', '.join(sorted(sees))}, which the step changes" if sees else "it is the step")
                    raise self.refuse(f"a host sync (.item(), .cpu(), print, ...) inside the step cannot wait for "
                                      f"the replay: {why}; read values after the step")
                # a name the rest of the step binds again (a GAN's `output`) is read through an alias
                # bound here, so that the moved read sees this statement's value, not the last one
                rebound = sorted(_names_read(statement) & set().union(*map(_names_assigned, window[i + 1:])))
                renames = {name: f"_cg_{name}_{positions[statement].start.line}" for name in rebound}
                if renames:
                    core += cst.parse_module("".join(f"{a} = {n}\n" for n, a in renames.items())).body
                    aliases += renames.values()
                    statement = _renamed_reads(statement, renames)
                moved.append(statement)  # logging, running totals: run after the replay instead
                continue
            core.append(statement)
        found = _host_data_call(core, functions)
        if found:
            call, what = found
            raise self.refuse(f"line {positions[call].start.line}: {what} reads host data inside the step; a graph "
                              "would run it once, at capture, and replay its first value on every iteration "
                              "(fetch the batch before the step)")
        before = [s for s in body[:start] if not is_zero_grad(s)]
        post = [s for s in body[end + 1:] if not is_zero_grad(s)]
        # everything the step reads that changes from one iteration to the next is an input:
        # the batch, the loop's own targets, names the body assigns before the step
        # (a name the step binds before reading it is its own, whatever discovery guessed)
        read = set().union(*map(_names_read, core))
        assigned = set().union(*map(_names_assigned, core))
        read = {name for name in read if name not in assigned or name in _read_first(core)}
        # any name bound anywhere in the loops around the step, outside it, may differ from one
        # iteration to the next: the batch fetched after the step (`X, Y = get_batch()` at the end
        # of the body, for the next iteration) is an input too, never a value the capture bakes in
        rebound = _names_rebound(outer, skip=core)
        variant = list(dict.fromkeys([*spec.batch, *_target_names(loop.target)] if isinstance(loop, cst.For) else
                                     spec.batch)) + sorted(rebound)
        inputs = list(dict.fromkeys(name for name in variant if name in read))
        # state carried from one iteration to the next (`hidden = model(x, hidden)`): read before
        # the step binds it, so it goes in as an input and comes back as an output
        carried = [name for name in sorted(_read_first(core) & assigned) if name not in inputs]
        unbound = [name for name in carried if name not in self._bound_on_every_path_to(outer)]
        if unbound and not isinstance(scope, cst.FunctionDef):
            raise self.refuse(f"the step carries {unbound[0]!r} from one iteration to the next, but {unbound[0]!r} is "
                              "not bound before the loop on every path (it is bound under an if); a captured step "
                              "needs its first value")
        # in a function: bound to None at its start, so that the replay's argument exists on the
        # path that never binds it (the word-language-model example's Transformer has no `hidden`)
        self.declared = (scope, unbound)
        inputs += carried
        returns = self._live_outs(core, inputs, scope, positions, aliases)
        # an attribute the step sets (minGPT's `self.loss`) comes back and is set again at each
        # replay: after a batch of another shape ran eagerly it would otherwise keep that value
        returns += sorted({p for statement in core for p in _names_assigned(statement, paths=True) if "." in p})
        step_def = self._step_function(core, inputs, returns, accumulate)
        call = f"_cg_step_graph({', '.join(inputs)})"
        target = ", ".join(returns)
        line = f"{target} = {call}  # cg-advise: replays the captured step\n" if returns else f"{call}\n"
        new_body = before + hoisted + list(cst.parse_module(line).body) + moved + post
        models = spec.models or ([spec.model] if spec.model else [])
        # a value kept past the next replay (appended to a list, bound to another name) would be
        # overwritten by it: the helper then hands out copies
        clone = ", clone_outputs=True" if _keeps_reference([outer], set(returns), skip=core) else ""
        clone += ", accumulate=True" if accumulate else ""
        setup = [step_def] + list(cst.parse_module(
            f"_cg_step_graph = _CgFullIterationGraph(_cg_step, [{', '.join(optimizers)}], "
            f"[{', '.join(models)}]{clone})\n").body)
        return setup, loop.with_changes(body=loop.body.with_changes(body=new_body))

    def _bound_on_every_path_to(self, node) -> set:
        """Names bound before ``node`` runs whatever path is taken: simple statements before it in
        its block and in each enclosing block up to the function (whose parameters count too) or
        the module. The word-language-model example binds `hidden` only for RNNs, under an if."""
        names = set()
        while node in self.parents:
            block = self.parents[node]
            body = getattr(block, "body", ())
            statements = list(body) if isinstance(body, (list, tuple)) else []   # a block, the module
            if node in statements:
                names |= set().union(*map(_names_assigned, [s for s in statements[:statements.index(node)]
                                                           if isinstance(s, cst.SimpleStatementLine)]))
            if isinstance(block, cst.FunctionDef):
                names |= {p.name.value for p in block.params.params + block.params.kwonly_params}
                break
            node = block
        return names

    def _live_outs(self, core, inputs, scope, positions, aliases=()) -> list:
        """Names the step binds that anything else in the enclosing function (or module) reads:
        code further down the loop body, the next iteration (the body before the step, a
        `while` condition), code after the loop (`return loss`, `print(f"{loss}")`,
        `outputs.logits`), an outer loop. They come back from the graph and are re-bound in
        the loop; inside the captured function alone they would vanish with it. Conservative:
        a read anywhere outside the step counts, even one after a re-binding. State the step
        carries to its next run (an RNN's hidden state) is an input and comes back too."""
        assigned = set().union(*map(_names_assigned, core))
        returns = sorted(assigned & (_names_read(scope, skip=core) | set(aliases) | set(inputs)))
        for name in returns:
            value = _host_value_binding(core, name)
            if value is not None:
                line = positions[value].start.line
                raise self.refuse(f"line {line}: {name!r} is read after the step but holds a Python value "
                                  f"({cst.Module([]).code_for_node(value.value)}), which a replayed graph "
                                  "cannot update; compute it after the step")
        return returns

    def _optimizer_steps_in_graphs(self) -> bool:
        """Is the optimizer one whose step can be captured? SGD and the capturable families can;
        an optimizer built elsewhere (a function's parameter) is assumed to be one of those (the
        helper makes it capturable); a class we do not know keeps its step eager."""
        assignments = _Assignments()
        self.module.visit(assignments)
        built = [callee.split(".")[-1] for o in self._optimizers() for callee in assignments.callees.get(o, [])]
        return all(name in CAPTURABLE_OPTIMIZERS + ("SGD",) for name in built)

    def _capturable_optimizer(self, module):
        """Adam-family optimizers must be built with capturable=True to step inside a graph."""
        optimizers = set(self._optimizers())

        class Capturable(cst.CSTTransformer):
            def leave_Assign(self, original, updated):
                targets = [dotted(t.target) for t in updated.targets]
                value = updated.value
                if (optimizers & set(targets) and isinstance(value, cst.Call)
                        and dotted(value.func).split(".")[-1] in CAPTURABLE_OPTIMIZERS):
                    # only on a GPU: on a CPU (the script's fallback) capturable Adam refuses to step
                    return updated.with_changes(value=_with_keyword(value, "capturable", "torch.cuda.is_available()"))
                return updated

        return module.visit(Capturable())

    def _step_function(self, core, inputs, returns, accumulate=False):
        ret = f"    return {', '.join(returns)}\n" if returns else ""
        what = ("One micro-step's forward, loss and backward, captured by cg-advise; the gradients add up over "
                "the replays." if accumulate else
                "Forward, loss and backward, captured by cg-advise; the optimizer steps after each replay."
                if self.optimizer_outside else
                "One training iteration, captured whole by cg-advise (scope full_iteration).")
        header = (f"def _cg_step({', '.join(inputs)}):\n"
                  f'    """{what}"""\n'
                  f"    pass\n{ret}")
        function = cst.parse_module(header).body[0]
        statements = list(function.body.body)
        docstring, tail = statements[0], statements[2:]
        return function.with_changes(body=function.body.with_changes(body=[docstring, *core, *tail]))


def _renamed_reads(statement, renames: dict):
    """``statement`` reading each name in ``renames`` under its new name (targets unchanged)."""

    class Rename(cst.CSTTransformer):
        def visit_AssignTarget(self, node) -> bool:
            return False

        def leave_Attribute(self, original, updated):
            return updated.with_changes(attr=original.attr)   # `x.output`: an attribute, not a name

        def leave_Arg(self, original, updated):
            return updated.with_changes(keyword=original.keyword)   # `f(output=...)`: a keyword

        def leave_Name(self, original, updated):
            return updated.with_changes(value=renames.get(updated.value, updated.value))

    return statement.visit(Rename())


def _with_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """``f(a, name=x)`` -> ``f(a, name=value)``: the keyword set last, any earlier one dropped."""
    args = [a for a in call.args if not (a.keyword and a.keyword.value == name)]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    arg = cst.Arg(keyword=cst.Name(name), value=cst.parse_expression(value),
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    return call.with_changes(args=[*args, arg])


def _compiled_name(model: str) -> str:
    """``_cg_compiled_model`` for ``model``, ``_cg_compiled_self_model`` for ``self.model``."""
    return "_cg_compiled_" + model.replace(".", "_")


def _call_through(loop, aliases: dict):
    """The loop with each call of a model in ``aliases`` made through its alias."""

    class Calls(cst.CSTTransformer):
        def leave_Call(self, original, updated):
            name = dotted(updated.func)
            if name in aliases:
                return updated.with_changes(func=cst.Name(aliases[name]))
            return updated

    return loop.visit(Calls())


def _marks_each_step(loop):
    """compile's CUDA graphs reuse their output memory on the next run; without a mark of each
    iteration's start, a loop that runs the model twice per step (micro-batches) or reads an
    output after the backward failed on the GPU: "accessing tensor output of CUDAGraphs that
    has been overwritten by a subsequent run"."""
    if not isinstance(loop.body, cst.IndentedBlock):
        return loop
    mark = cst.parse_module("torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's "
                            "CUDA graphs\n").body
    return loop.with_changes(body=loop.body.with_changes(body=[*mark, *loop.body.body]))


def _autocast_without_cache(statement):
    """autocast inside a captured region must not cache casts: cache_enabled=False."""

    class Fix(cst.CSTTransformer):
        def leave_Call(self, original, updated):
            if dotted(updated.func).split(".")[-1] == "autocast" and not any(
                    a.keyword and a.keyword.value == "cache_enabled" for a in updated.args):
                return _with_keyword(updated, "cache_enabled", "False")
            return updated

    return statement.visit(Fix())


class _Splice(cst.CSTTransformer):
    """Swaps our loop for its rewrite and puts the setup statements right before the outer loop."""

    def __init__(self, loop, new_loop, outer, before, declared=(None, ())):
        self.loop, self.new_loop, self.outer, self.before = loop, new_loop, outer, before
        self.function, self.declared = declared
        self.inserted = False

    def leave_FunctionDef(self, original, updated):
        if original is not self.function or not self.declared:
            return updated
        body = list(updated.body.body)
        docstring = 1 if body and isinstance(body[0], cst.SimpleStatementLine) and isinstance(
            body[0].body[0], cst.Expr) and isinstance(body[0].body[0].value, cst.SimpleString) else 0
        lines = "".join(f"{name} = None  # cg-advise: the captured step takes it on every path\n"
                        for name in self.declared)
        body[docstring:docstring] = cst.parse_module(lines).body
        return updated.with_changes(body=updated.body.with_changes(body=body))

    def leave_For(self, original, updated):
        return self._swap(original, updated)

    def leave_While(self, original, updated):
        return self._swap(original, updated)

    def _swap(self, original, updated):
        if original is self.loop and self.new_loop is not self.loop:
            updated = self.new_loop
        if original is self.outer:
            self.inserted = True
            first, *rest = self.before
            blank = [cst.EmptyLine(indent=False)]
            leading = updated.leading_lines or (blank if isinstance(first, cst.FunctionDef) else [])
            before = [first.with_changes(leading_lines=leading)]
            before += [s.with_changes(leading_lines=blank) if isinstance(s, cst.SimpleStatementLine)
                       and isinstance(first, cst.FunctionDef) else s for s in rest]
            return cst.FlattenSentinel([*before, updated.with_changes(leading_lines=blank)])
        return updated


def _add_helper(module: cst.Module, scope: str) -> cst.Module:
    """The helper goes after the last top-level import (``import torch`` added if missing)."""
    body = list(module.body)
    last_import = max((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                       and isinstance(s.body[0], (cst.Import, cst.ImportFrom))), default=-1)
    has_torch = any(isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Import)
                    and any(dotted(a.name) == "torch" for a in s.body[0].names) for s in body)
    helper = list(cst.parse_module(HELPERS[scope]).body)
    imports = [s for s in helper if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Import)]
    helper = helper[len(imports):]  # the helper's own imports join the file's
    helper[0] = helper[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    extra = ([] if has_torch else list(cst.parse_module("import torch\n").body)) + [
        i.with_changes(leading_lines=[]) for i in imports]
    return module.with_changes(body=body[:last_import + 1] + extra + helper + body[last_import + 1:])
