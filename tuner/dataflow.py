"""The step as data flow: which names and attribute paths a statement binds and reads, which
statements of a loop body make the training step (from the first one whose values reach the
backward or the update), and which must stay out of a captured graph: batch loading, a fetch
of the next batch, host reads, Python-side state, host data. The rewriter (patch.py) builds
on these; they read source only, never run it."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from .discover import (LOGGING_PREFIXES, SkippingVisitor, calls_backward, calls_in, code_of, dotted, host_call, nodes, target_names,
                       tensor_method_result)


def is_method(call: cst.Call, receiver: Optional[str], method: str) -> bool:
    func = call.func
    return (isinstance(func, cst.Attribute) and func.attr.value == method
            and (receiver is None or dotted(func.value) == receiver))


def has_sync(node) -> bool:
    return bool(calls_in(node, lambda c: host_call(c) is not None))


class NameVisitor(SkippingVisitor):
    """Visits the names code names: not an attribute's (``opt.step``: ``step`` is no name read)
    nor a keyword's (``f(lr=x)``: ``lr`` is none either)."""

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Arg(self, node: cst.Arg) -> bool:
        node.value.visit(self)
        return False


def names_read(node, skip=()) -> set:
    """Names in ``node`` (targets included), not descending into the nodes in ``skip``."""
    names = set()

    class Reader(NameVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            names.add(name.value)

    node.visit(Reader(skip))
    return names


def live_reads(scope, names: set, skip, parents) -> set:
    """Of ``names``, those a read in ``scope`` outside ``skip`` (the step) may find holding the
    step's value. A read finds another value where an earlier statement of a block around it
    binds the name unconditionally (a plain assignment) with no step statement in between:
    PPO's ``dist, values = ac(obs)`` at the top of each rollout before ``dist.log_prob(...)``,
    where the minibatch step bound ``dist`` too, a distribution no graph can hand back. A read
    in a function, class, lambda or generator expression defined in ``scope`` may run at any
    time: live unless that definition binds the name first itself (then it is its own).
    ``parents``: each node's parent (libcst's ParentNodeProvider of the tree)."""
    skipped = {id(n) for n in skip}
    live = set()
    for read in _name_reads(scope, names, skip):
        if read.value not in live and not _bound_first(read, scope, skipped, parents):
            live.add(read.value)
    return live


def _name_reads(scope, names: set, skip) -> list:
    """The ``cst.Name`` nodes of ``names`` that ``scope`` reads outside ``skip``: not a plain
    assignment's, loop's or ``with``'s target, an attribute's name or a keyword."""
    found = []

    class Reads(NameVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            if name.value in names:
                found.append(name)

        def visit_AssignTarget(self, node: cst.AssignTarget) -> bool:
            _visit_target(node.target, self)
            return False

        def visit_AnnAssign(self, node: cst.AnnAssign) -> bool:
            _visit_target(node.target, self)
            for part in (node.annotation, node.value):
                if part is not None:
                    part.visit(self)
            return False

        def visit_For(self, node: cst.For) -> bool:
            _visit_target(node.target, self)
            for part in (node.iter, node.body, node.orelse):
                if part is not None:
                    part.visit(self)
            return False

        def visit_AsName(self, node: cst.AsName) -> bool:
            _visit_target(node.name, self)
            return False

    scope.visit(Reads(skip))
    return found


def _visit_target(target, visitor) -> None:
    """Visit what a target reads: ``x[i] = v`` reads ``x`` and ``i``; a plain name reads nothing."""
    if isinstance(target, cst.Name):
        return
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _visit_target(element.value, visitor)
    elif isinstance(target, cst.StarredElement):
        _visit_target(target.value, visitor)
    else:
        target.visit(visitor)


def _bound_first(read: cst.Name, scope, skipped: set, parents) -> bool:
    """Whether a block around ``read`` (up to ``scope``) binds its name unconditionally in an
    earlier statement with no statement of the step from there to the one holding ``read``."""
    node = read
    while node is not scope and node in parents:
        parent = parents[node]
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.GeneratorExp)):
            return False   # run later, or (a class body's comprehension) in another scope
        body = getattr(parent, "body", None)
        at = next((i for i, child in enumerate(body) if child is node), None) if isinstance(body, (list, tuple)) else None
        if at is not None:
            for index in range(at - 1, -1, -1):
                if _holds_step(body[index], skipped):
                    break
                if read.value in _plain_bindings(body[index]):
                    if not _holds_step(node, skipped):
                        return True
                    break
        node = parent
    return False


def _plain_bindings(statement) -> set:
    """Names a simple statement line binds by plain assignment (``a, b = ...``, ``x: T = ...``)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return set()
    bound = set()
    for small in statement.body:
        if isinstance(small, cst.Assign):
            for target in small.targets:
                bound.update(n for n in target_names(target.target) if "." not in n)
        elif isinstance(small, cst.AnnAssign) and small.value is not None:
            bound.update(n for n in target_names(small.target) if "." not in n)
    return bound


def _holds_step(node, skipped: set) -> bool:
    """Whether ``node`` is, or holds, a statement of the step (``skipped``: their ids)."""
    return any(id(n) in skipped for n in nodes(node, cst.CSTNode))


def reads_before_binding(statements) -> list:
    """(name, statement) for names each simple statement reads, in source order, before it
    binds them: ``h = rnn(x, h)`` reads ``h``; ``loss = f(out)`` does not read ``loss``. A
    ``for`` reads its iterable, then binds its target (``for name, p in model.named_parameters()``
    inside the step binds ``p`` there: no input of the graph)."""
    found = []

    class Lines(cst.CSTVisitor):
        def visit_SimpleStatementLine(self, line) -> bool:
            for small in line.body:
                if isinstance(small, (cst.Assign, cst.AnnAssign)) and small.value is not None:
                    read = names_read(small.value)
                else:
                    read = names_read(small)   # `n += 1` reads n
                found.extend((name, small) for name in sorted(read))
                found.extend((name, None) for name in sorted(names_assigned(small)))
            return False

        def visit_For(self, node: cst.For) -> bool:   # its iterable is read, then its target bound
            found.extend((name, node) for name in sorted(names_read(node.iter)))
            found.extend((name, None) for name in sorted(plain_target_names(node.target)))
            return True

    for statement in statements:
        statement.visit(Lines())
    return found


def names_assigned(statement, paths: bool = False) -> set:
    """Plain names the statement binds; with ``paths``, attribute paths too: ``logits,
    self.loss = model(x, y)`` binds ``logits`` and ``self.loss`` (minGPT's Trainer keeps its
    loss on itself)."""
    names = set()
    targets = target_names if paths else plain_target_names

    class Writer(cst.CSTVisitor):
        def visit_AssignTarget(self, target: cst.AssignTarget) -> None:
            names.update(targets(target.target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            names.update(targets(node.target))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            names.update(targets(node.target))

    statement.visit(Writer())
    return names


def root_name(expr) -> Optional[str]:
    """The name an attribute, item or method path starts from (``a`` of ``a.b[0].c``, of
    ``a.detach()``)."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)) or (isinstance(expr, cst.Call)
                                                               and isinstance(expr.func, cst.Attribute)):
        expr = expr.func.value if isinstance(expr, cst.Call) else expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def is_keyed_store(target) -> bool:
    """Whether an assignment's target stores by a constant key or an attribute (``batch["pred"]``,
    ``state.step``): into a container or an object, not into a tensor's values (``x[:, 0]``)."""
    if isinstance(target, cst.Attribute):
        return True
    return isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(
        getattr(target.slice[0].slice, "value", None), (cst.SimpleString, cst.ConcatenatedString))


def aliases_of(statements, names: set) -> dict:
    """Name -> the one of ``names`` it may be a view or a part of (each of them itself): the
    names the statements bind from one by unpacking, an item, an attribute or a method
    (``x, y = batch``, ``x = batch["x"]``, ``x = batch[0].view(-1)``), or loop over it (``for t
    in batch``). A change of theirs in place may be a change of it."""
    reach = {name: name for name in names}
    grown = True
    while grown:
        grown = False
        for node in (n for statement in statements for n in nodes(statement, (cst.Assign, cst.For))):
            source = reach.get(root_name(node.value if isinstance(node, cst.Assign) else node.iter))
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for name in (n for target in targets for n in plain_target_names(target)):
                if source is not None and name not in reach:
                    reach[name], grown = source, True
    return reach


def handed_to_functions(statements, reach: dict, functions: Optional[dict]) -> list:
    """(call, function, parameter, name) for each argument by which the statements hand one of
    ``reach`` (or a part of one: ``aliases_of``) to one of the script's own functions
    (``compute_loss(model, batch)``): what the function does to its parameter, it does to that
    name. A ``*args`` or ``**kwargs`` argument is not followed."""
    found = []
    for statement in statements if functions else ():
        for call in calls_in(statement, lambda c: dotted(c.func) in functions):
            function = functions[dotted(call.func)]
            params = function.params
            positional = [p.name.value for p in params.posonly_params + params.params]
            keywords = {p.name.value for p in params.params + params.kwonly_params}
            given = [(param, a) for param, a in zip(positional, [a for a in call.args if a.keyword is None])
                     if not a.star]
            given += [(a.keyword.value, a) for a in call.args if a.keyword is not None and a.keyword.value in keywords]
            found += [(call, function, param, reach[root_name(a.value)]) for param, a in given
                      if root_name(a.value) in reach]
    return found


def changed_in_place(statements, names: set, functions: Optional[dict] = None, depth: int = 2) -> list:
    """Of ``names``, those the statements change in place, directly or through a name that may be
    a view or a part of one (``aliases_of``), in the order met: an in-place method on one or on a
    part of one (``x.mul_(0.5)``, ``batch["x"].clamp_(0)``), an in-place function of one
    (``torch.clamp_(x, 0, 1)``, ``nn.init.zeros_(x)``, ``F.relu(x, inplace=True)``), an ``out=``
    into one, a store into one (``x[:, 0] = 0``) or an augmented assignment (``x += 1``: in place
    for a tensor). A graph's replay changes its own copies of its inputs, so these must reach
    the caller's objects another way (or the rewrite is refused)."""
    reach = aliases_of(statements, names)
    bound = set().union(*(names_rebound(s) for s in statements))
    found = []
    for _, function, param, name in handed_to_functions(statements, reach, functions if depth else None):
        if changed_in_place(function.body.body, {param}, functions, depth - 1):
            found.append(name)   # normalize(images) whose body runs images.div_(255)
    for statement in statements:
        for call in calls_in(statement, lambda c: True):
            name = call.func.attr.value if isinstance(call.func, cst.Attribute) else dotted(call.func)
            inplace = any(a.keyword is not None and a.keyword.value == "inplace" for a in call.args)
            if (name.endswith("_") and not name.startswith("_") and name not in GRADIENT_FUNCTIONS) or inplace:
                receiver = root_name(call.func.value) if isinstance(call.func, cst.Attribute) else None
                first = next((a.value for a in call.args if a.keyword is None and not a.star), None)
                # a function of torch's (`torch.clamp_(x, ...)`, `nn.init.zeros_(w)`, `F.relu(x,
                # inplace=True)`) changes its first argument, a method (`label.fill_(v)`) its receiver
                function = receiver is None or (receiver in TORCH_NAMESPACES and receiver not in set(reach) | bound)
                found.append(root_name(first) if function and first is not None else None if function else receiver)
        for arg in nodes(statement, (cst.Arg,)):
            if arg.keyword is not None and arg.keyword.value == "out":
                found += [root_name(e.value) for e in arg.value.elements] if isinstance(
                    arg.value, (cst.Tuple, cst.List)) else [root_name(arg.value)]
        for node in nodes(statement, (cst.Assign, cst.AugAssign)):
            for target in (node.targets if isinstance(node, cst.Assign) else [node]):
                if isinstance(node, cst.AugAssign) or isinstance(target.target, (cst.Attribute, cst.Subscript)):
                    found.append(root_name(target.target))
    return [name for name in dict.fromkeys(reach[n] for n in found if n in reach) if name in names]


# the names scripts import torch's functions under: a call through them is a function's, not a method's
TORCH_NAMESPACES = ("torch", "th", "nn", "F", "functional", "init")
# in-place functions that change the gradients of what they are handed, not its values
GRADIENT_FUNCTIONS = ("clip_grad_norm_", "clip_grad_value_")
# the methods that change a container's structure, or a tensor's shape: a graph's warm-up and
# capture would run them on its copy of an input, again and again (a second pop fails, a second
# unsqueeze_ adds another dimension), and never on the caller's
CONTAINER_METHODS = ("pop", "popitem", "update", "setdefault", "append", "extend", "insert", "clear", "remove",
                     "unsqueeze_", "squeeze_", "resize_", "resize_as_", "t_", "transpose_", "swapdims_", "swapaxes_",
                     "as_strided_", "set_")
LIST_VALUES = (cst.List, cst.Tuple, cst.ListComp, cst.Set, cst.Dict)


def changes_structure(statements, names: set, functions: Optional[dict] = None, depth: int = 2):
    """The first node by which the statements change the structure of one of ``names`` (or of a
    part of one, ``aliases_of``), or None: a store by key or attribute (``batch["pred"] = out``,
    in a tuple of targets too), a container method (``batch.pop("labels")``, ``losses += [loss]``)
    or a shape's (``y.unsqueeze_(1)``), a ``del``; or a call that hands one to a function of
    the script's (``functions``, ``depth`` deep) that does so to its parameter
    (``compute_loss(model, batch)`` whose body pops the labels)."""
    reach = aliases_of(statements, names)
    for call, function, param, _ in handed_to_functions(statements, reach, functions if depth else None):
        if changes_structure(function.body.body, {param}, functions, depth - 1) is not None:
            return call
    for statement in statements:
        for node in nodes(statement, (cst.Assign, cst.AugAssign, cst.Call, cst.Del)):
            if isinstance(node, cst.AugAssign):
                if root_name(node.target) in reach and (isinstance(node.value, LIST_VALUES) or (
                        isinstance(node.value, cst.Call) and dotted(node.value.func) in ("list", "tuple", "dict"))):
                    return node
                continue
            if isinstance(node, cst.Call):
                if isinstance(node.func, cst.Attribute) and node.func.attr.value in CONTAINER_METHODS \
                        and root_name(node.func.value) in reach:
                    return node
                continue
            stores = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            while stores:
                store = stores.pop()
                if isinstance(store, (cst.Tuple, cst.List)):
                    stores.extend(e.value for e in store.elements)
                elif (isinstance(node, cst.Del) and isinstance(store, (cst.Subscript, cst.Attribute))
                      or is_keyed_store(store)) and root_name(store) in reach:
                    return node
    return None


def gradient_of_input(statements, names: set, functions: Optional[dict] = None, depth: int = 2):
    """The first node by which the statements make one of ``names`` (or a part of one,
    ``aliases_of``) require grad or take its gradient, or None: ``images.requires_grad_(True)``,
    ``x.requires_grad = True``, ``images.grad``, ``torch.autograd.grad(loss, images)``. A graph
    copies its inputs into buffers of its own, detached: the copy has no gradient (FGSM's
    ``images.grad.sign()`` fails at the warm-up), and a backward would not reach the caller's.
    Followed into the script's ``functions`` it hands one to (``x = mark(x)``), ``depth`` deep:
    the call is returned."""
    reach = aliases_of(statements, names)
    for call, function, param, _ in handed_to_functions(statements, reach, functions if depth else None):
        if gradient_of_input(function.body.body, {param}, functions, depth - 1) is not None:
            return call
    for statement in statements:
        for node in nodes(statement, (cst.Call, cst.Attribute, cst.Assign)):
            if isinstance(node, cst.Call):
                if is_method(node, None, "requires_grad_") and root_name(node.func.value) in reach:
                    return node
                if dotted(node.func).endswith("autograd.grad") and any(
                        root_name(a.value) in reach or names_read(a.value) & set(reach)
                        for a in node.args[1:] if a.keyword is None or a.keyword.value == "inputs"):
                    return node
            elif isinstance(node, cst.Attribute):
                if node.attr.value == "grad" and root_name(node.value) in reach:
                    return node
            elif any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                     and root_name(t.target.value) in reach for t in node.targets):
                return node
    return None


def parameter_names(function: cst.FunctionDef) -> list:
    """The names of a function's positional-or-keyword and keyword-only parameters, in order."""
    return [p.name.value for p in function.params.params + function.params.kwonly_params]


def is_docstring(statement) -> bool:
    """Whether a body's first statement is its docstring (a string on its own line)."""
    return (isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, cst.SimpleString))


def names_rebound(node, skip=()) -> set:
    """Names bound anywhere inside ``node`` (assignments, loop targets, ``with ... as``),
    not descending into the nodes in ``skip``."""
    names = set()

    class Binder(SkippingVisitor):
        def visit_SimpleStatementLine(self, line) -> bool:
            names.update(names_assigned(line))
            return False

        def visit_For(self, node: cst.For) -> None:
            names.update(plain_target_names(node.target))

        def visit_AsName(self, node: cst.AsName) -> None:
            names.update(plain_target_names(node.name))

    node.visit(Binder(skip))
    return names


def plain_target_names(node) -> list:
    """Plain names a target binds (``self.x = ...`` binds no local name)."""
    return [name for name in target_names(node) if "." not in name]


STORE_METHODS = ("append", "appendleft", "extend", "insert", "add", "put", "put_nowait")
VIEW_METHODS = ("detach", "view", "view_as", "reshape", "squeeze", "flatten")


# builtins that hand back one of their arguments, or its items (a tensor's rows are views)
PASSING_BUILTINS = ("max", "min", "sorted", "list", "tuple", "reversed")
COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


def kept_through(expr, names: set, aliased) -> bool:
    """Whether ``aliased(value, names)`` holds for a value ``expr`` may hand on: either branch of
    a conditional or boolean expression (``loss.detach() if smooth is None else ...``, ``best or
    loss``), an argument of a builtin that returns one (``max(best, norm)``), or an item of a
    comprehension over one (``{k: v.detach() for k, v in losses.items()}``)."""
    if isinstance(expr, cst.IfExp):
        return aliased(expr.body, names) or aliased(expr.orelse, names)
    if isinstance(expr, cst.BooleanOperation):
        return aliased(expr.left, names) or aliased(expr.right, names)
    if isinstance(expr, cst.Call) and dotted(expr.func) in PASSING_BUILTINS:
        return any(aliased(a.value, names) for a in expr.args)
    if isinstance(expr, COMPREHENSIONS):
        inner, loop = set(names), expr.for_in
        while loop is not None:   # `for k, v in losses.items()`: k and v may be parts of losses
            if root_name(loop.iter) in inner or aliased(loop.iter, inner):
                inner |= set(plain_target_names(loop.target))
            loop = loop.inner_for_in
        item = expr.value if isinstance(expr, cst.DictComp) else expr.elt   # a dict's keys are names, not tensors
        return inner != names and aliased(item, inner)
    return False


def keeps_reference(statements, names: set, skip=()) -> bool:
    """Whether the statements keep one of ``names`` (or a view of it) beyond the statement:
    ``losses.append(loss.detach())``, ``best = loss``, ``(step, loss)``. Reading a value
    (``loss.item()``, ``total += loss``) makes a new one and keeps nothing."""

    def aliased(expr, names=names) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in names
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in VIEW_METHODS:
            return aliased(expr.func.value, names)
        if isinstance(expr, (cst.Attribute, cst.Subscript)):   # `.data`, `out[:, 1]`: views, or parts
            return aliased(expr.value, names)
        return kept_through(expr, names, aliased)

    found = []

    class Keeper(SkippingVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            found.append(aliased(node.value))

        def visit_Call(self, node: cst.Call) -> None:
            # a store (`losses.append(...)`), or a method of the script's own objects, which may
            # keep what it is handed (`tracker.update("loss", loss.detach())`); torch's make new values
            if isinstance(node.func, cst.Attribute) and (node.func.attr.value in STORE_METHODS or (
                    root_name(node.func) not in (*TORCH_NAMESPACES, *names) and not node.func.attr.value.endswith("_"))):
                found.extend(aliased(arg.value) for arg in node.args)

        def visit_Element(self, node) -> None:   # list, tuple and set items
            found.append(aliased(node.value))

        def visit_DictElement(self, node: cst.DictElement) -> None:
            found.append(aliased(node.value))

    for statement in statements:
        statement.visit(Keeper(skip))
    return any(found)


def model_outputs(body, models: set, functions: Optional[dict] = None) -> set:
    """The names ``body`` binds to what a call of one of ``models`` returns, or to a part or view
    (``outputs = model(**batch)``, ``loss = outputs.loss``, ``logits = out[0]``): a graphed
    forward hands back its graph's output buffers, which the next replay overwrites. A view or
    another name for one (``best = loss.detach()``) is what ``keeps_output`` looks for. What a
    function of the script's returns counts too where it is handed a model or names one
    (``loss, hidden = update(policy, ...)`` returning the GRU's new state)."""
    names = set()
    roots = {m.split(".")[0] for m in models}

    def runs_model(call) -> bool:
        function = (functions or {}).get(dotted(call.func))
        return function is not None and (any(dotted(a.value).split(".")[0] in roots for a in call.args)
                                         or bool(names_read(function.body) & roots))

    def rooted(expr) -> bool:   # the call, or a part of what it returned (an attribute, an item)
        if isinstance(expr, cst.Call):
            return dotted(expr.func) in models or runs_model(expr)
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return rooted(expr.value) or (isinstance(expr.value, cst.Name) and expr.value.value in names)
        return False

    assignments = nodes(body, (cst.Assign,))
    for _ in range(2):   # a part bound before the whole in the text (a loop's second turn) too
        for assign in assignments:
            if rooted(assign.value):
                names.update(n for t in assign.targets for n in plain_target_names(t.target))
    return names


def keeps_output(statements, names: set) -> bool:
    """Whether the statements keep one of ``names`` (a model's output, ``model_outputs``), or a
    view of it, where the next call of the model may find it: bound to another name
    (``last = loss``), stored (``losses.append(loss.detach())``), or put in a tuple, list or
    dict that is. Unpacking a call's result (``output, hidden = model(x, hidden)``) and passing
    a value to a call that makes a new one (``torch.cat((a, fake.detach()))``) keep nothing."""

    def aliased(expr, names=names) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in names
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in VIEW_METHODS:
            return aliased(expr.func.value, names)
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return aliased(expr.value, names)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return any(aliased(e.value, names) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return any(aliased(e.value, names) for e in expr.elements if isinstance(e, cst.DictElement))
        return kept_through(expr, names, aliased)

    found = []

    class Keeper(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            bound = {n for t in node.targets for n in plain_target_names(t.target)}
            # a part of an output (`loss = outputs.loss`) is one of the outputs itself
            part = isinstance(node.value, (cst.Attribute, cst.Subscript)) and bound <= names
            found.append(aliased(node.value) and not part)

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in STORE_METHODS:
                found.extend(aliased(arg.value) for arg in node.args)

    for statement in statements:
        statement.visit(Keeper())
    return any(found)


HOST_VALUE_CALLS = ("float", "str", "repr", "format", "time.time", "time.perf_counter", "time.monotonic")


def host_value_binding(statements, name: str):
    """The assignment in ``statements`` that binds ``name`` to a plain Python value (a number
    or string literal, an f-string, ``float(...)``, ``time.time()``), else None."""
    found = []

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            value = node.value
            host = (isinstance(value, (cst.Float, cst.Integer, cst.SimpleString, cst.FormattedString,
                                       cst.ConcatenatedString))
                    or isinstance(value, cst.Call) and dotted(value.func) in HOST_VALUE_CALLS)
            if host and any(name in plain_target_names(t.target) for t in node.targets):
                found.append(node)

    for statement in statements:
        statement.visit(Finder())
    return found[0] if found else None


def is_bookkeeping(statement, later) -> bool:
    """A statement that calls nothing and feeds nothing later in the step (``n += 1``)."""
    if not isinstance(statement, cst.SimpleStatementLine) or calls_in(statement, lambda c: True):
        return False
    assigned = names_assigned(statement)
    read_later = set().union(*map(names_read, later))
    return bool(assigned) and not (assigned & read_later)


EXITS = ("sys.exit", "exit", "quit", "os._exit", "print", "warnings.warn")


def is_exit_guard(statement) -> bool:
    """An ``if`` whose blocks only end the run or say so (torchvision's ``if not
    math.isfinite(loss_value): print(...); sys.exit(1)``, a ``raise``): it changes no state the
    step or the loop reads, so it can run after the replay (the run then ends after the step's
    optimizer update, not before it)."""
    if not isinstance(statement, cst.If):
        return False

    def plain(block) -> bool:
        lines = block.body if isinstance(block, cst.IndentedBlock) else [block]
        for line in lines:
            if isinstance(line, cst.If):
                if not is_exit_guard(line):
                    return False
                continue
            if not isinstance(line, cst.SimpleStatementLine):
                return False
            for small in line.body:
                if isinstance(small, cst.Raise):
                    continue
                if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
                        and (dotted(small.value.func) in EXITS or dotted(small.value.func).startswith(LOGGING_PREFIXES))):
                    return False
        return True

    orelse = statement.orelse
    rest = True if orelse is None else (is_exit_guard(orelse) if isinstance(orelse, cst.If) else plain(orelse.body))
    return plain(statement.body) and rest


def backward_passes(loop) -> int:
    """How many backward() calls one iteration of ``loop`` makes, at least: a backward inside a
    loop in the body (micro-steps) counts as two."""
    count = len(calls_in(loop.body, lambda c: is_method(c, None, "backward")))   # each call counts
    inner = [n for n in nodes(loop.body, (cst.For, cst.While))
             if calls_backward(n.body)]
    return count + len(inner)


def leaves_iteration(statement):
    """The first ``continue``, ``break`` or ``return`` in ``statement`` that leaves the loop
    iteration it sits in (not one of a loop or a function inside it), or None. A step that a
    condition cuts short (`if not torch.isfinite(grad_norm): optimizer.zero_grad(); continue`)
    cannot be one captured function: the replay runs it whole."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return None   # a function defined in the body: its returns leave it, not the iteration
    functions = nodes(statement, (cst.FunctionDef, cst.Lambda))
    loops = nodes(statement, (cst.For, cst.While))   # the statement's own loop too
    if isinstance(statement, (cst.For, cst.While)):   # its else block runs in this iteration
        loops = [n for n in loops if n is not statement] + [statement.body]
    found = (nodes(statement, (cst.Continue, cst.Break), skip=functions + loops)
             + nodes(statement, (cst.Return,), skip=functions))
    return found[0] if found else None


HOST_DATA_FUNCTIONS = ("next", "iter", "open", "input")
HOST_DATA_MODULES = ("np.", "numpy.", "random.", "os.", "pd.", "pandas.")


def host_data_call(statements, functions: dict):
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
            inner = [c for c in calls_through(functions[name], functions) if host_or_sync(c)] if name in functions else []
            if inner:
                return call, f"{name}() (it calls {dotted(inner[0].func)})"
    return None


# operations whose result's size depends on the values: the host waits for the GPU to learn it,
# which a capture cannot (``operation not permitted when stream is capturing``, found on the GPU
# in PyG's ``out[data.train_mask]``)
BOOLEAN_METHODS = ("bool", "ne", "eq", "gt", "lt", "ge", "le", "logical_not", "logical_and", "logical_or", "logical_xor",
                   "isnan", "isinf", "isfinite", "isneginf", "isposinf")
SIZED_BY_VALUES = ("nonzero", "masked_select", "unique", "argwhere", "unique_consecutive")


def data_dependent_shape(statements, module=None):
    """(the node, what it is) of the first operation in ``statements`` whose result's size
    depends on the tensors' values (a sync a graph cannot hold), else None: ``nonzero`` and its
    kind, and indexing by a boolean mask: a subscript by a comparison (``x[x > 0]``), by
    ``~m``, or by a name (or attribute) that ends in ``mask`` or that ``module`` binds to a
    comparison or a tensor built with ``dtype=torch.bool`` or ``.bool()``."""
    booleans = _boolean_names(module) if module is not None else set()

    def called(call) -> str:   # `nonzero` of x.nonzero(), `torch.where` of torch.where(m)
        return call.func.attr.value if isinstance(call.func, cst.Attribute) else dotted(call.func)

    def boolean(index) -> bool:
        if isinstance(index, cst.Comparison) or (isinstance(index, cst.UnaryOperation)
                                                 and isinstance(index.operator, cst.BitInvert)):
            return True
        if isinstance(index, cst.Call):   # m.bool(), labels.ne(-100), torch.isfinite(x)
            return called(index).split(".")[-1] in BOOLEAN_METHODS
        if isinstance(index, cst.Subscript) and any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.SimpleString)
                                                    and "mask" in e.slice.value.value.lower() for e in index.slice):
            return True   # batch["attention_mask"]
        name = dotted(index)
        return bool(name) and (name.split(".")[-1].lower().endswith("mask") or name in booleans)

    for statement in statements:
        for node in nodes(statement, (cst.Subscript, cst.Call)):
            if isinstance(node, cst.Call):
                method = called(node)
                if method in SIZED_BY_VALUES or method in {f"torch.{m}" for m in SIZED_BY_VALUES}:
                    return node, f"{method.split('.')[-1]}()"
                if method == "torch.where" and len(node.args) == 1:
                    return node, "where() of a condition alone (its nonzero positions)"
                continue
            elements = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
            if any(boolean(e) for e in elements):
                return node, "indexing by a boolean mask"
    return None


def _boolean_names(module) -> set:
    """Names ``module`` binds (plainly) to a comparison, to a call with ``dtype=torch.bool`` or
    to ``<...>.bool()``."""
    found = set()
    for assign in nodes(module, cst.Assign):
        value = assign.value
        made = isinstance(value, cst.Comparison) or (isinstance(value, cst.Call) and (
            (isinstance(value.func, cst.Attribute) and value.func.attr.value == "bool")
            or any(a.keyword and a.keyword.value == "dtype" and dotted(a.value) == "torch.bool" for a in value.args)))
        if made:
            found.update(n for t in assign.targets for n in plain_target_names(t.target))
    return found


HOST_FACTORIES = ("torch.arange", "torch.zeros", "torch.ones", "torch.full", "torch.empty", "torch.eye",
                  "torch.linspace", "torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.tensor",
                  "torch.as_tensor", "torch.from_numpy")
COPIED_FROM_HOST = ("torch.tensor", "torch.as_tensor")   # with a device, still a copy of host data
MOVE_METHODS = ("to", "cuda")


def host_tensor_copy(statements, functions: dict, outside=()):
    """(call, what) for the first copy of a tensor made on the host to the GPU in
    ``statements`` or the script's functions they call: ``torch.arange(n).to(z.device)``, a name
    bound to ``torch.arange(n)`` (there, or in the ``outside`` statements before them: it
    comes in as the step's input) then moved, ``torch.tensor(values, device=...)``. Inside a
    capture such a copy from pageable host memory fails on its sync (a SimCLR loss's targets,
    built this way, made full_iteration fail with sync-during-capture); None without one."""
    def on_host(call) -> bool:
        return dotted(call.func) in HOST_FACTORIES and not any(
            a.keyword is not None and a.keyword.value == "device" for a in call.args)

    def copied(call) -> bool:   # torch.tensor(values, device=...), batch.new_tensor([...])
        return (dotted(call.func) in COPIED_FROM_HOST and not on_host(call)
                or isinstance(call.func, cst.Attribute) and call.func.attr.value == "new_tensor")

    def moved(call, host_names) -> bool:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in MOVE_METHODS):
            return False
        receiver = func.value
        return (bool(calls_in(receiver, on_host)) or isinstance(receiver, cst.Name) and receiver.value in host_names)

    def bound_on_host(nodes) -> set:
        return {name for node in nodes for n in _assignments(node) if isinstance(n.value, cst.Call) and on_host(n.value)
                for name in plain_target_names(n.targets[0].target)}

    def first(node, host_names: set):
        return next((c for c in calls_in(node, lambda c: True) if copied(c) or moved(c, host_names)), None)

    host_names = bound_on_host(outside)   # grows with the names each statement binds on the host
    for statement in statements:
        found = first(statement, host_names)
        if found is not None:
            return found, code_of(found)
        for call in calls_in(statement, lambda c: True):
            name = dotted(call.func)
            inner = first(functions[name], set()) if name in functions else None
            if inner is not None:   # in the script's function it calls: an expression that copies
                return call, f"{name}() ({code_of(inner)})"
        host_names |= bound_on_host([statement])
    return None


# torch's constructors that make a tensor on the host unless given a device
HOST_TENSOR_FUNCTIONS = ("torch.tensor", "torch.as_tensor", "torch.zeros", "torch.ones", "torch.full", "torch.empty")


def host_scalar(value) -> bool:
    """A 0-dim tensor made on the host (``torch.tensor(0.0)``, ``torch.zeros(())``): the only
    host tensor a GPU step can read, which a capture then takes as a constant."""
    if not (isinstance(value, cst.Call) and dotted(value.func) in HOST_TENSOR_FUNCTIONS and value.args) \
            or gpu_tensor_value(value):
        return False
    first = value.args[0].value
    if dotted(value.func) in ("torch.tensor", "torch.as_tensor"):
        return is_number_expression(first, set())
    return isinstance(first, (cst.Tuple, cst.List)) and not first.elements


# torch's random functions that draw on the host unless given a device
HOST_RANDOM_FUNCTIONS = ("torch.rand", "torch.randn", "torch.randint", "torch.randperm")
SAMPLE_METHODS = ("sample", "rsample", "sample_n")


def host_draw(statements, functions: dict, module):
    """(call, why) for the first random draw on the host in ``statements`` or the script's
    functions they call, or None: ``torch.rand(1)`` without ``device=`` (unless the script sets
    a default device), or ``.sample()`` of a distribution built from host tensors
    (``torch.distributions.Beta(torch.tensor([a]), ...)``, mixup's ``lam``). Inside a graph it
    runs once, at capture: every replay reuses that draw (and ``.to(device)`` of it fails the
    capture: a copy from pageable memory)."""
    if calls_in(module, lambda c: dotted(c.func).endswith("set_default_device")):
        return None
    numbers = {n for a in nodes(module, (cst.Assign,)) if is_number_expression(a.value, set())
               for t in a.targets for n in plain_target_names(t.target)}

    def on_host(arg) -> bool:   # a number, or a tensor torch makes without a device
        return is_number_expression(arg, numbers) or (
            isinstance(arg, cst.Call) and dotted(arg.func).startswith("torch.") and not gpu_tensor_value(arg))

    host_distributions = set()
    for assign in nodes(module, (cst.Assign,)):
        value = assign.value
        if isinstance(value, cst.Call) and ("distributions." in dotted(value.func) or _is_distribution_class(
                value, module)) and value.args and all(on_host(arg.value) for arg in value.args):
            host_distributions.update(n for t in assign.targets for n in plain_target_names(t.target))
    for call in (c for statement in statements for c in calls_through(statement, functions)):
        name = dotted(call.func)
        if any(a.keyword is not None and a.keyword.value == "generator" for a in call.args):
            return call, "draws from a generator of its own, which a capture does not take in"
        if any(a.keyword is not None and a.keyword.value == "error_if_nonfinite" and dotted(a.value) == "True"
               for a in call.args):
            return call, "checks the norm on the host (error_if_nonfinite=True), a sync a capture cannot hold"
        if name in HOST_RANDOM_FUNCTIONS and not any(a.keyword is not None and a.keyword.value == "device"
                                                     for a in call.args):
            return call, "draws random numbers on the host"
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in SAMPLE_METHODS \
                and dotted(call.func.value) in host_distributions:
            return call, "samples a distribution built from host tensors"
    return None


def _is_distribution_class(value, module) -> bool:
    """``Beta(...)`` where the script imports ``Beta`` from torch.distributions."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Name):
        return False
    return any(dotted(i.module).startswith("torch.distributions") and not isinstance(i.names, cst.ImportStar)
               and any((a.evaluated_alias or a.evaluated_name) == value.func.value for a in i.names)
               for i in nodes(module, (cst.ImportFrom,)) if i.module is not None)


PYTHON_RANDOM = ("random.", "np.random.", "numpy.random.")


def self_methods(cls: cst.ClassDef) -> dict:
    """``self.<name>`` -> the method, for the methods ``cls`` defines: what a call through
    ``self`` inside the class runs."""
    return {f"self.{f.name.value}": f for f in cls.body.body if isinstance(f, cst.FunctionDef)}


def stateful_forward(module):
    """(class name, node, what) for the first class of the script, called somewhere, whose
    ``forward`` (or ``__call__``, or a method of its own they call) draws random numbers on the
    host (torchvision's ``if torch.rand(1) < self.p`` flip, ``random.random()``), counts in
    Python on itself (``self.num_updates += 1``, a temperature annealed from it) or copies a
    tensor made on the host to the GPU: a graph runs it only while it captures, and every replay
    repeats what it did then (a copy fails the capture). None where there is none."""
    made = {dotted(c.func) for c in calls_in(module, lambda c: True)}
    for cls in nodes(module, (cst.ClassDef,)):
        if cls.name.value not in made:
            continue
        methods = self_methods(cls)
        for entry in (m for m in ("self.forward", "self.__call__") if m in methods):
            drawn = host_draw(methods[entry].body.body, methods, module)
            if drawn is not None:
                return cls.name.value, drawn[0], drawn[1]
            called = [methods[dotted(c.func)] for c in calls_in(methods[entry].body, bool) if dotted(c.func) in methods]
            bodies = [methods[entry], *called]
            # Python's or numpy's generator (a seq2seq's ``random.random() < teacher_forcing_ratio``)
            drawn = [c for f in bodies for c in calls_in(f.body, lambda c: dotted(c.func).startswith(PYTHON_RANDOM))]
            if drawn:
                return cls.name.value, drawn[0], "draws random numbers on the host"
            copied = host_tensor_copy(list(methods[entry].body.body), methods)
            if copied is not None:   # torch.zeros(n, b, v).to(self.device): the capture fails on its sync
                return cls.name.value, copied[0], "copies a tensor made on the host to the GPU"
            counted = [n for f in bodies for n in nodes(f.body, (cst.AugAssign,))
                       if root_name(n.target) == "self" and isinstance(n.target, cst.Attribute)]
            if counted:
                return cls.name.value, counted[0], "counts in Python on itself"
            rebound = [n for f in bodies for n in nodes(f.body, (cst.Assign,)) if any(
                isinstance(t.target, cst.Attribute) and dotted(t.target.value) == "self"
                and dotted(t.target) in keyed_paths_read(n.value) for t in n.targets)]
            if rebound:
                return cls.name.value, rebound[0], "keeps state on itself by binding it anew"
            read = [c for f in bodies for c in calls_in(f.body, lambda c: host_call(c) is not None or (
                dotted(c.func) in ("int", "float", "bool") and len(c.args) == 1 and root_name(c.args[0].value) == "self"))]
            if read:
                return cls.name.value, read[0], "reads a tensor on the host"
    return None


def objects_called(statements) -> set:
    """The dotted names the statements call (``criterion``, ``self.criterion``, ``loss_fn.kl``),
    with the object of each ``x.forward(...)`` too: what an attribute set on one reaches."""
    called = {dotted(c.func) for statement in statements for c in calls_in(statement, bool)}
    return called | {name.rsplit(".", 1)[0] for name in called if name.endswith(".forward")}


def forward_attributes(module) -> dict:
    """Attribute name -> the assignment, for each ``self.<name> = ...`` in a ``forward`` of the
    script's classes (a VAE encoder's ``self.kl``): read from the module after a graphed forward,
    it is still the capture's tensor, cut off from any backward after the first."""
    found = {}
    for cls in nodes(module, (cst.ClassDef,)):
        for f in (f for f in cls.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "forward"):
            for assign in nodes(f.body, (cst.Assign,)):
                for t in assign.targets:
                    if isinstance(t.target, cst.Attribute) and dotted(t.target.value) == "self":
                        found.setdefault(t.target.attr.value, assign)
    return found


def made_inside_models(module, name: str, models: set) -> bool:
    """Whether the script builds the class ``name`` inside a class (a submodule's) or binds it
    to one of ``models``: a graph of the model's forward holds it, where one called beside the
    model (a flip module in the loop) stays eager under fwd_bwd."""
    is_made = lambda c: dotted(c.func) == name   # noqa: E731
    if any(calls_in(cls.body, is_made) for cls in nodes(module, (cst.ClassDef,))):
        return True
    return any(calls_in(a.value, is_made) and {n for t in a.targets for n in target_names(t.target)} & models
               for a in nodes(module, (cst.Assign,)))


def _assignments(node, skip=()) -> list:
    """The single-target assignments in ``node``, in source order, outside the nodes in ``skip``."""
    found = []

    class Finder(SkippingVisitor):
        def visit_Assign(self, assign: cst.Assign) -> None:
            if len(assign.targets) == 1:
                found.append(assign)

    node.visit(Finder(skip))
    return found


def calls_through(node, functions: dict, depth: int = 2) -> list:
    """The calls inside ``node``, and inside the script's functions it calls, ``depth`` deep."""
    found = []
    for call in calls_in(node, lambda c: True):
        found.append(call)
        name = dotted(call.func)
        if depth and name in functions and functions[name] is not node:
            found += calls_through(functions[name], functions, depth - 1)
    return found


GPU_METHODS = ("backward", "step", "zero_grad", "train", "eval", "requires_grad_", "register_hook")


def is_host_method_call(statement, protected: set) -> bool:
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


def is_loading(statement, before, functions) -> bool:
    """A statement in the middle of the step that picks or builds an input (``noise =
    noise_bank[i]``, ``b = x.size(0)``) from nothing the step computed, and binds nothing the
    step read before it: it runs before the replay, and what it binds is an input. In the graph
    it would make the iteration's counter an input that differs on every replay."""
    if not isinstance(statement, cst.SimpleStatementLine) or not names_assigned(statement):
        return False
    if not all(is_loading_call(c, functions) for c in calls_in(statement, lambda c: True)):
        return False
    made_before = set().union(*map(names_assigned, before))
    read_before = set().union(*map(names_read, before))
    return not statement_reads(statement) & made_before and not names_assigned(statement) & read_before


def is_prefetch(statement, before, after) -> bool:
    """A statement in the middle of the step that fetches what the next iteration reads
    (nanoGPT's ``X, Y = get_batch('train')`` after the forward): it binds a name the step read
    before it, reads nothing the step computed, and nothing after it in the step reads what it
    binds. Inside a graph it would replay one batch forever; after the replay it does what it
    did, and the names it binds are the next replay's inputs."""
    if calls_in(statement, lambda c: is_method(c, None, "backward") or is_method(c, None, "step")):
        return False
    binds = names_assigned(statement)
    read_before = set().union(*map(names_read, before))
    made_before = set().union(*map(names_assigned, before))
    read_after = set().union(*map(names_read, after))
    return bool(binds & read_before) and not binds & read_after and not statement_reads(statement) & made_before


def zeroes_grads(statement, receivers) -> bool:
    """``optimizer.zero_grad(...)`` or ``model.zero_grad()``: the helper clears gradients
    itself (to None before capture, so the graph's backward writes rather than adds)."""
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr) and isinstance(statement.body[0].value, cst.Call)
            and any(is_method(statement.body[0].value, r, "zero_grad") for r in receivers if r))


# calls that fetch, build or move a batch: a statement made only of these stays before the step
LOADING_FUNCTIONS = ("next", "iter", "dict", "list", "tuple", "zip", "len", "range", "enumerate", "min", "max", "int")
LOADING_METHODS = ("to", "cuda", "items", "values", "keys", "get", "float", "half", "double", "long", "int",
                   "bfloat16", "pin_memory", "randn", "rand", "randint", "randperm", "zeros", "ones", "arange",
                   "from_numpy", "as_tensor", "view", "reshape", "contiguous", "size", "unsqueeze", "squeeze",
                   "stack", "cat", "is_available", "device_count")


def is_loading_call(call: cst.Call, functions: Optional[dict] = None, depth: int = 2) -> bool:
    """A call that fetches, builds, moves or reshapes a batch; with ``functions`` (the script's
    own), also a call of one whose calls all are (the word-language-model example's
    ``get_batch(source, i)``, slicing one long tensor), two calls deep."""
    if isinstance(call.func, cst.Name):
        name = call.func.value
        if functions and depth and name in functions and name not in LOADING_FUNCTIONS:
            return all(is_loading_call(c, functions, depth - 1) for c in calls_in(functions[name].body, lambda c: True))
        return name in LOADING_FUNCTIONS
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in LOADING_METHODS


def read_first(statements) -> set:
    """Names the statements read before they bind them."""
    bound, found = set(), set()
    for name, small in reads_before_binding(statements):
        if small is None:
            bound.add(name)
        elif name not in bound:
            found.add(name)
    return found


def statement_reads(statement) -> set:
    """Names a statement reads (``loss = f(out)`` reads ``out``, not ``loss``)."""
    if isinstance(statement, cst.SimpleStatementLine):
        return {name for name, small in reads_before_binding([statement]) if small is not None}
    return names_read(statement)


def step_start(body, end: int, is_zero_grad, functions: Optional[dict] = None) -> int:
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
                      and all(is_loading_call(c, functions) for c in calls_in(statement, lambda c: True))
                      and not statement_reads(statement) & computed)
        loading.append(is_loading)
        if not is_loading:
            computed |= names_assigned(statement)
    needed, start = set(), end
    for i in range(end, -1, -1):
        statement = body[i]
        if is_zero_grad(statement):
            continue
        backward = calls_backward(statement)
        if i == end or backward or names_assigned(statement, paths=True) & needed:
            if loading[i]:
                continue
            needed |= statement_reads(statement) | paths_read(statement)
            start = i
    return start


def paths_read(statement) -> set:
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


def keyed_path(expr) -> str:
    """``cfg.scale`` of an attribute, ``cfg['scale']`` of an item with a constant string key
    (its value's repr, whichever quotes the script wrote), '' of anything else."""
    if isinstance(expr, cst.Attribute):
        return dotted(expr)
    if (isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)
            and isinstance(expr.slice[0].slice.value, cst.SimpleString) and dotted(expr.value)):
        return f"{dotted(expr.value)}[{expr.slice[0].slice.value.evaluated_value!r}]"
    return ""


def keyed_paths_read(node) -> set:
    """The attribute paths and constant-key items ``node`` mentions (``keyed_path``)."""
    return {p for n in nodes(node, (cst.Attribute, cst.Subscript)) for p in [keyed_path(n)] if p}


NUMBER_CALLS = ("min", "max", "abs", "float", "int", "round", "pow", "len")


def loop_counter(loop: cst.For):
    """The name ``loop`` counts with, or None: ``for i in range(...)``, the index of ``for i, x in
    enumerate(...)``."""
    func = dotted(loop.iter.func) if isinstance(loop.iter, cst.Call) else ""
    if func == "range" and isinstance(loop.target, cst.Name):
        return loop.target.value
    if (func == "enumerate" and isinstance(loop.target, (cst.Tuple, cst.List)) and loop.target.elements
            and isinstance(loop.target.elements[0].value, cst.Name)):
        return loop.target.elements[0].value.value
    return None


def varying_numbers(node, skip=(), module=None) -> dict:
    """Names that hold a plain Python number changing from one iteration of the loops in
    ``node`` to the next, each with the node that binds it: the counter of ``for i in
    range(...)``, the index of ``for i, batch in enumerate(...)``, and names assigned (outside
    ``skip``) from arithmetic on those, number literals, constants (names ``module`` binds to
    numbers only) and attributes (``args.warmup``): ``beta = min(1.0, step / warmup_steps)``.
    A graph captures such a value as a constant; read by the step, it changes the step's
    inputs at every iteration."""
    numbers = {}

    class Counters(SkippingVisitor):
        def visit_For(self, loop: cst.For) -> None:
            counter = loop_counter(loop)
            if counter is not None:
                numbers[counter] = loop

    node.visit(Counters(skip))
    assignments = [(a.targets[0].target.value, a) for a in _assignments(node, skip)
                   if isinstance(a.targets[0].target, cst.Name)]
    constants = number_constants(module) if module is not None else set()
    changed = True
    while changed:   # a number computed from a number computed from the counter
        changed = False
        for name, assign in assignments:
            known = set(numbers) | constants
            if name not in numbers and (is_number_expression(assign.value, known, varying=set(numbers))
                                        or host_number_read(assign.value, known)):
                numbers[name] = assign
                changed = True
    return numbers


def host_number_read(expr, known: set = frozenset()) -> bool:
    """A Python number read from a tensor on the host, or arithmetic on one: ``int(mask.sum())``,
    ``loss.item() / n``, ``float(norm)``, where the argument is no number already (``int(args.bs)``,
    ``known`` names, ``int(x.size(0))``). Bound in a loop, it changes from one iteration to the next (a token count
    that divides a summed loss)."""
    if isinstance(expr, cst.Call):
        if dotted(expr.func) in ("int", "float") and len(expr.args) == 1:
            if isinstance(expr.args[0].value, cst.Call):   # not int(x.size(0)), int(len(batch))
                return tensor_method_result(expr)
            return not is_number_expression(expr.args[0].value, known)
        return isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "item" and not expr.args
    if isinstance(expr, cst.BinaryOperation):
        return host_number_read(expr.left, known) or host_number_read(expr.right, known)
    if isinstance(expr, cst.UnaryOperation):
        return host_number_read(expr.expression, known)
    return False


class _PickHoister(cst.CSTTransformer):
    """Replaces each load ``container[index]`` whose index reads a loop counter and nothing the
    step binds, of a container in ``containers`` (``safe_pick_containers``), with a name (the
    same name for the same code, none a name ``taken``); not inside a lambda, a comprehension, a
    conditional expression or ``and``/``or``, where the pick may not run. Records each rebuilt
    node beside its original (``originals``, by id)."""

    DEFERRED = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.IfExp,
                cst.BooleanOperation)

    def __init__(self, counters: set, assigned: set, containers: set, taken: set, picks: dict,
                 originals: dict) -> None:
        super().__init__()
        self.counters, self.assigned, self.containers, self.taken = counters, assigned, containers, taken
        self.picks, self.originals = picks, originals
        self.deferred = 0
        self.replaced = 0   # picks replaced so far: a value without any is kept as it was

    def on_visit(self, node) -> bool:
        self.deferred += isinstance(node, self.DEFERRED)
        return super().on_visit(node)

    def on_leave(self, original, updated):
        self.deferred -= isinstance(original, self.DEFERRED)
        result = super().on_leave(original, updated)
        if result is not original:   # the node kept beside its original: an id is never reused while kept
            self.originals[id(result)] = (result, original)
        return result

    def leave_Subscript(self, original: cst.Subscript, updated):
        if self.deferred or not is_pick(original, self.counters, self.assigned) \
                or original.value.value not in self.containers:
            return updated
        code = code_of(original)
        if code not in self.picks:
            base = f"_cg_{original.value.value}"
            taken = self.taken | set(self.picks.values())
            self.picks[code] = next(n for n in (base, *(f"{base}_{k}" for k in range(1, 1000))) if n not in taken)
        self.replaced += 1
        return cst.Name(self.picks[code])


def is_pick(node, counters: set, assigned: set) -> bool:
    """``container[index]``: a plain name indexed by an expression that reads a loop counter
    and nothing the step binds, of a container the step does not bind."""
    if not isinstance(node, cst.Subscript) or not isinstance(node.value, cst.Name) or node.value.value in assigned:
        return False
    reads = set().union(*(names_read(element) for element in node.slice))
    return bool(reads & counters) and not reads & assigned


# the simple statements whose value a pick is read in (and moved from)
VALUE_STATEMENTS = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr)


def _simple_values(statements):
    """The values of the simple statements' assignments and expressions: where a pick is read."""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for part in statement.body:
                if isinstance(part, VALUE_STATEMENTS) and part.value is not None:
                    yield part.value


def safe_pick_containers(statements, counters: set, scope, optimizers=(), loop=None) -> tuple:
    """The containers whose picks by a counter can be read before the replay without changing
    what the step computes: bound in ``scope`` (outside the step) only to a tensor on a device
    (``gpu_tensor_value``: a pick of a list of floats or of modules would run every step
    eagerly, one of a CPU tensor would be read at capture), none with ``requires_grad`` or
    handed to an optimizer (the copy into the graph's buffers detaches it: latent codes trained
    by the loop would stop training); and the step reads the container only through such picks
    (and its shape: ``for i in range(X.size(0))``),
    none of them written in place (``memory.mul_(0.5)``, ``ema[step].mul_(0.9)``, ``out=``,
    ``preds[step] = pred``: read before the replay, the pick would miss the write, or the write
    would go to the copy), anywhere in ``loop`` (the loops around the step; the step alone
    without one), which binds none of them either. With, for every container picked, why it is
    not one ('' where it is)."""
    assigned = set().union(*map(names_assigned, statements)) if statements else set()
    around = [loop] if loop is not None else list(statements)
    rebound = set().union(*map(names_assigned, around)) - counters
    found, written, seen, sized = {}, set(), {}, {}
    # names the step binds to a pick (`x = features[step]`): a write through them is one through the pick
    aliases = {}
    for statement in around:
        for assign in nodes(statement, (cst.Assign,)):
            picked = {n.value.value for n in nodes(assign.value, (cst.Subscript,)) if is_pick(n, counters, assigned)}
            for target in assign.targets:
                for name in plain_target_names(target.target):
                    aliases.setdefault(name, set()).update(picked)

    def through(node) -> set:
        """The containers a receiver reaches: its names, its picks' and its aliases'."""
        read = names_read(node)
        return read | set().union(*(aliases.get(name, set()) for name in read))

    class Reads(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            seen[node.value] = seen.get(node.value, 0) + 1

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            if node.attr.value.endswith("_") and not node.attr.value.startswith("__") or \
                    node.attr.value in ("data", "grad"):
                written.update(through(node.value))   # an in-place method of a pick or an alias, or its .data
            if node.attr.value in SHAPE_READS and isinstance(node.value, cst.Name):   # `range(X.size(0))`
                sized[node.value.value] = sized.get(node.value.value, 0) + 1
            node.value.visit(self)
            return False

        def visit_Call(self, node: cst.Call) -> None:
            if dotted(node.func) == "len" and len(node.args) == 1 and isinstance(node.args[0].value, cst.Name):
                sized[node.args[0].value.value] = sized.get(node.args[0].value.value, 0) + 1

        def visit_Arg(self, node: cst.Arg) -> bool:
            if node.keyword is not None and node.keyword.value == "out":
                written.update(through(node.value) | names_read(node.value))
            node.value.visit(self)
            return False

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            stores = [node.target]
            while stores:   # `preds[step] = pred`, `x[0] = ...`: a store through it; `out, h = ...` binds names
                target = stores.pop()
                if isinstance(target, (cst.Tuple, cst.List)):
                    stores.extend(element.value for element in target.elements)
                elif isinstance(target, cst.StarredElement):
                    stores.append(target.value)
                elif not isinstance(target, cst.Name):
                    written.update(through(target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            written.update(through(node.target))   # `acc[step] += loss`, `x += 1` on an alias

        def visit_Subscript(self, node: cst.Subscript) -> None:
            if is_pick(node, counters, assigned):
                found[node.value.value] = found.get(node.value.value, 0) + 1

    for statement in around:
        statement.visit(Reads())
    # every mention of the container in the loop is one of its picks (no other read, no
    # store through it: `acc[step] += loss` is a store, its target read here as a mention)
    why = {}
    for name, count in found.items():
        why[name] = ("the loop writes into it" if name in written else
                     "the loop binds it again" if name in rebound else
                     "the loop reads it otherwise too" if seen.get(name, 0) - sized.get(name, 0) != count else
                     _not_device_tensors(scope, name, statements, optimizers))
    return {name for name, reason in why.items() if not reason}, why


SHAPE_READS = ("shape", "size", "dim", "ndim", "numel", "device", "dtype")   # of a container: no value read


def _not_device_tensors(scope, name: str, step, optimizers=()) -> str:
    """Why a binding of ``name`` in ``scope`` outside ``step`` is not a tensor on a device, or
    something there makes it train (``requires_grad``, ``nn.Parameter``, an optimizer given it);
    '' where neither."""
    bindings, trains = [], [False]

    class Finder(SkippingVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(name in plain_target_names(t.target) for t in node.targets):
                bindings.append(node)
            targets = [t.target for t in node.targets]
            if any(isinstance(t, cst.Attribute) and dotted(t) == f"{name}.requires_grad" for t in targets) or \
                    any(set(plain_target_names(t)) & set(optimizers) for t in targets) and name in names_read(node.value):
                trains[0] = True   # `latents.requires_grad = True`, or an optimizer built over it

        def visit_Call(self, node: cst.Call) -> None:
            func = dotted(node.func)
            if any(a.keyword is not None and a.keyword.value == "requires_grad" for a in node.args) and \
                    any(name in names_read(a.value) for a in node.args) or \
                    func.split(".")[-1] == "requires_grad_" and name in names_read(node.func) or \
                    (func.startswith(("torch.optim.", "optim.")) or func in optimizers) and \
                    any(name in names_read(a.value) for a in node.args):
                trains[0] = True

    scope.visit(Finder(step))
    if trains[0] or any(_requires_grad_kwarg(b.value) for b in bindings):
        return "it trains (requires_grad, or an optimizer's), and its copy in the graph would not"
    known = _device_tensor_names(scope, step)
    if not bindings or not all(len(b.targets) == 1 and isinstance(b.targets[0].target, cst.Name)
                               and gpu_tensor_value(b.value, known) for b in bindings):
        return "it is not bound here to a tensor on the GPU"
    return ""


def _device_tensor_names(scope, step) -> set:
    """The names ``scope`` (outside ``step``) binds to a tensor on a device and only to one, each
    binding read in order, so that one made from another counts (``Y = (X @ W).argmax(-1)``)."""
    known, other = set(), set()

    class Binder(SkippingVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for name in (n for t in node.targets for n in plain_target_names(t.target)):
                single = len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                (known if single and gpu_tensor_value(node.value, known) else other).add(name)

    scope.visit(Binder(step))
    return known - other


def _requires_grad_kwarg(node) -> bool:
    return any(a.keyword is not None and a.keyword.value == "requires_grad"
               for call in nodes(node, (cst.Call,)) for a in call.args)


# tensor methods whose result stays on the tensor's device
SAME_DEVICE_METHODS = ("float", "half", "double", "long", "int", "bool", "bfloat16", "contiguous", "clone", "detach",
                       "view", "reshape", "permute", "transpose", "unsqueeze", "squeeze", "flatten", "chunk", "split",
                       "unbind", "expand", "repeat", "abs", "sign", "normal_", "uniform_", "argmax", "argmin", "sum",
                       "mean", "softmax", "log_softmax", "sigmoid", "tanh", "exp", "clamp", "round", "floor", "t")


def gpu_tensor_value(node, known=frozenset()) -> bool:
    """An expression that makes a tensor on a device, or a list or tuple of them: a call of a
    ``torch`` function given ``device=``, ``.to(...)``/``.cuda()`` on anything, arithmetic on
    such, ``torch.stack``/``torch.cat`` of such, a comprehension or literal of such; with
    ``known``, the names bound to such a tensor and their items (``(X[..., :4].sum(-1) > 4)``)."""
    if isinstance(node, cst.Name):
        return node.value in known
    if isinstance(node, cst.Subscript):
        return isinstance(node.value, cst.Name) and node.value.value in known
    if isinstance(node, cst.Call):
        func = dotted(node.func)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "cuda"):
            return True
        if func.startswith("torch.") and any(a.keyword is not None and a.keyword.value == "device" for a in node.args):
            return True
        if func in ("torch.stack", "torch.cat", "list", "tuple") and node.args:
            return gpu_tensor_value(node.args[0].value, known)
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in SAME_DEVICE_METHODS:
            return gpu_tensor_value(node.func.value, known)   # `.float()`, `.view(...)` of such a tensor
        return False
    if isinstance(node, cst.BinaryOperation):
        return gpu_tensor_value(node.left, known) or gpu_tensor_value(node.right, known)
    if isinstance(node, cst.Comparison):   # `(torch.rand(..., device=d) < rate)`: a bool tensor there
        return gpu_tensor_value(node.left, known) or any(gpu_tensor_value(c.comparator, known) for c in node.comparisons)
    if isinstance(node, cst.UnaryOperation):
        return gpu_tensor_value(node.expression, known)
    if isinstance(node, (cst.ListComp, cst.GeneratorExp)):
        return gpu_tensor_value(node.elt, known)
    if isinstance(node, (cst.List, cst.Tuple)):
        return bool(node.elements) and all(gpu_tensor_value(e.value, known) for e in node.elements)
    return False


def hoist_picks(statements, counters: set, assigned: set, containers: set = frozenset(), taken=frozenset()) -> tuple:
    """The step's statements with each batch picked by a loop counter (``model(features[step])``)
    of ``containers`` read through a name instead (none of ``taken``), the picks
    (``{"features[step]": "_cg_features"}``, in the order first met) and, by id, each node
    rebuilt beside its original. Only the values of simple statements (assignments,
    expressions) are read; a pick under a block inside the step is left alone. Bound before the
    replay (``_cg_features = features[step]``), the batch is an input copied into the graph,
    and the step no longer reads the counter: public loops index their data so (``noise_bank[i]``
    in the DCGAN tutorial's shape)."""
    picks, originals, out = {}, {}, []
    hoister = _PickHoister(counters, assigned, set(containers), set(taken), picks, originals)
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine):
            out.append(statement)
            continue
        small = []
        for part in statement.body:
            value = part.value if isinstance(part, VALUE_STATEMENTS) else None
            before = hoister.replaced
            new_value = value.visit(hoister) if value is not None else None
            if hoister.replaced > before:   # libcst rebuilds what it visits: kept as it was without a pick
                rebuilt = part.with_changes(value=new_value)
                originals[id(rebuilt)] = (rebuilt, part)
                part = rebuilt
            small.append(part)
        if any(a is not b for a, b in zip(small, statement.body)):
            rebuilt = statement.with_changes(body=small)
            originals[id(rebuilt)] = (rebuilt, statement)
            statement = rebuilt
        out.append(statement)
    return out, picks, originals


def indexed_by(statements, name: str):
    """The first subscript of the statements that reads ``name`` as an index of a container no
    statement binds (``features[step]``, ``noise_bank[i]``), where every read of ``name`` in
    them is such an index and that subscript is read in a simple statement's value; else None.
    The step then reads the loop's counter only to pick its batch: bound before the step
    (``x = features[step]``), the batch is the graph's input."""
    assigned = set().union(*map(names_assigned, statements)) if statements else set()
    subscripts = [node for statement in statements for node in nodes(statement, (cst.Subscript,))
                  if isinstance(node.value, cst.Name) and node.value.value not in assigned
                  and any(name in names_read(element) for element in node.slice)]
    inside = sum(_count_reads(element, name) for node in subscripts for element in node.slice)
    total = sum(_count_reads(statement, name) for statement in statements)
    loads = {id(n) for value in _simple_values(statements) for n in nodes(value, (cst.Subscript,))}
    return subscripts[0] if subscripts and inside == total and id(subscripts[0]) in loads else None


def _count_reads(node, name: str) -> int:
    """How often ``node`` reads ``name`` (an attribute, ``opt.step``, or a keyword, ``f(step=x)``,
    is no read)."""
    count = [0]

    class Counter(NameVisitor):
        def visit_Name(self, found: cst.Name) -> None:
            count[0] += found.value == name

    node.visit(Counter())
    return count[0]


def number_constants(module) -> set:
    """Names every assignment of ``module`` binds to a number (a literal, ``int(...)``,
    arithmetic on those and on attributes): ``warmup_steps = 100``."""
    bound = {}

    class Finder(cst.CSTVisitor):
        def visit_Assign(self, assign: cst.Assign) -> None:
            for target in assign.targets:
                for name in plain_target_names(target.target):
                    ok = isinstance(target.target, cst.Name) and is_number_expression(assign.value, set())
                    bound[name] = bound.get(name, True) and ok

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if isinstance(node.target, cst.Name):
                bound[node.target.value] = False

    module.visit(Finder())
    return {name for name, ok in bound.items() if ok}


def is_number_expression(expr, known: set, varying: set = frozenset()) -> bool:
    """Arithmetic on number literals, attributes and ``known`` names; with ``varying``, one of
    those must be read."""
    def number(e) -> bool:
        if isinstance(e, (cst.Integer, cst.Float)):
            return True
        if isinstance(e, cst.Name):
            return e.value in known
        if isinstance(e, cst.Attribute):
            return not isinstance(e.value, cst.Call)   # `args.warmup`, not `x.sum().item`
        if isinstance(e, cst.BinaryOperation):
            return number(e.left) and number(e.right)
        if isinstance(e, cst.UnaryOperation):
            return number(e.expression)
        if isinstance(e, cst.Call) and (dotted(e.func) in NUMBER_CALLS or dotted(e.func).startswith("math.")):
            return bool(e.args) and all(number(a.value) for a in e.args)
        return False

    return number(expr) and (not varying or bool(names_read(expr) & varying))


SPARSE_FUNCTIONS = ("torch.spmm", "torch.smm", "torch.hspmm", "torch.sspaddmm")
SPARSE_METHODS = ("to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc")
EMBEDDINGS = ("Embedding", "EmbeddingBag", "embedding", "embedding_bag")


def is_sparse_call(call: cst.Call) -> bool:
    """A call that builds or multiplies a sparse tensor (``torch.sparse_coo_tensor``,
    ``torch.sparse.mm``, ``adj.to_sparse()``, ``torch.spmm``) or an embedding with sparse
    gradients (``nn.Embedding(..., sparse=True)``)."""
    name = dotted(call.func)
    if name.startswith(("torch.sparse.", "torch.sparse_")) or name in SPARSE_FUNCTIONS:
        return True
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in SPARSE_METHODS:
        return True
    return name.rsplit(".", 1)[-1] in EMBEDDINGS and any(
        a.keyword is not None and a.keyword.value == "sparse" and dotted(a.value) == "True" for a in call.args)


RNN_MODULES = tuple(f"{prefix}{name}" for prefix in ("nn.", "torch.nn.") for name in ("RNN", "LSTM", "GRU"))


def rnn_module(module):
    """(call, what) for the first nn.RNN, nn.LSTM or nn.GRU the script builds, or None.
    TorchDynamo breaks its graph at these modules (``torch._dynamo.config.allow_rnn`` is off by
    default) and runs them eagerly: compile measured 0.98x and 1.02x on the H100 for an LSTM
    forecaster and a GRU seq2seq where their launch gaps read 1.24x and 3.01x."""
    found = calls_in(module, lambda c: dotted(c.func) in RNN_MODULES)   # not a script's own `class RNN`
    if not found:
        return None
    return found[0], f"{dotted(found[0].func)} (TorchDynamo runs RNN modules eagerly)"


def _made_dense(value) -> bool:
    """``torch.sparse_coo_tensor(...).to_dense().cuda()``: built sparse, bound dense (a
    ``to_dense`` in the chain of method calls after the last call that made it sparse)."""
    while isinstance(value, cst.Call):
        if is_sparse_call(value):
            return False
        if is_method(value, None, "to_dense"):
            return True
        value = value.func.value if isinstance(value.func, cst.Attribute) else None
    return False


def sparse_use(module, statements, functions: dict, models=None):
    """(node, what) for the first use of sparse tensors a graph would capture, or None: in
    every ``forward`` the script defines, in the arguments of the calls of ``models`` in
    ``statements`` (a name bound to a sparse tensor), and, where ``models`` is None (a graph
    of the whole step), anywhere in ``statements`` and the script's functions they call.
    Sparse kernels size their outputs from the data (the nonzeros of a coalesce, of a
    product), which a CUDA graph cannot hold: on the H100 a graph convolutional network's
    ``torch.sparse.mm`` made its fwd_bwd and full_iteration rewrites fail with a device-side
    assert."""
    for function in nodes(module, (cst.FunctionDef,)):
        if function.name.value == "forward":
            found = calls_in(function, is_sparse_call)
            if found:
                return found[0], f"{dotted(found[0].func) or 'a sparse call'} in a model's forward"
    made_sparse = {name for assign in _assignments(module) if calls_in(assign.value, is_sparse_call)
                   and not _made_dense(assign.value) for name in plain_target_names(assign.targets[0].target)}
    for statement in statements:
        calls = calls_through(statement, functions) if models is None else calls_in(
            statement, lambda c: dotted(c.func) in models)
        densified = isinstance(statement, cst.SimpleStatementLine) and all(
            isinstance(b, cst.Assign) and _made_dense(b.value) for b in statement.body)
        for call in calls:
            if models is None and is_sparse_call(call) and not densified:
                return call, dotted(call.func) or "a sparse call"
            given = sorted(set().union(*(names_read(a.value) for a in call.args)) & made_sparse)
            if given:
                return call, f"{given[0]} (a sparse tensor)"
    return None


def double_backward(statements, functions: dict, module=None):
    """The first call in ``statements``, or in the script's functions they call, that
    differentiates a backward again (``create_graph=True``: WGAN-GP's gradient penalty, an R1
    regulariser, MAML's inner step), or None. A graphed callable's backward and compile's are
    not differentiable: torch.compile fails on it with "does not currently support double
    backward", make_graphed_callables' backward is once_differentiable. Not timm's
    ``create_graph=second_order`` where ``module`` binds it only from the ``is_second_order``
    of optimizers torch builds, which have none (``second_order_flags``)."""
    never = second_order_flags(module) if module is not None else set()
    for statement in statements:
        for call in calls_through(statement, functions):
            if any(a.keyword is not None and a.keyword.value == "create_graph" and dotted(a.value) != "False"
                   and dotted(a.value) not in never for a in call.args):
                return call
    return None


def second_order_flags(module) -> set:
    """Names ``module`` binds only to what an optimizer says of itself through an attribute
    torch's optimizers do not have (timm's ``second_order = hasattr(optimizer,
    'is_second_order') and optimizer.is_second_order``), where every such optimizer is one
    torch builds (``torch.optim.AdamW(...)``, ``optim.SGD(...)``): always False there."""
    built = {}
    for assign in nodes(module, (cst.Assign,)):
        for target in assign.targets:
            for name in plain_target_names(target.target):
                callee = dotted(assign.value.func) if isinstance(assign.value, cst.Call) else ""
                built.setdefault(name, []).append(callee.startswith(("torch.optim.", "optim.")))
    torch_optimizers = {name for name, flags in built.items() if all(flags)}
    flags = {}
    for assign in nodes(module, (cst.Assign,)):
        readers = [a for a in nodes(assign.value, (cst.Attribute,)) if a.attr.value == "is_second_order"]
        asks = readers and all(dotted(a.value) in torch_optimizers for a in readers)
        for target in assign.targets:
            for name in plain_target_names(target.target):
                flags.setdefault(name, []).append(bool(asks))
    return {name for name, asks in flags.items() if all(asks)}


def requires_grad_change(statements, functions: dict, models=(), depth: int = 2):
    """The first node in ``statements``, or in the script's functions they call, that changes
    whether parameters require grad, or None: ``p.requires_grad = flag`` or ``requires_grad_``
    in a loop over ``.parameters()``, or ``model.requires_grad_(flag)`` of one of ``models``
    (not a tensor of the step's own, a gradient penalty's mixed batch). A GAN's discriminator
    frozen for its generator's update (pix2pix's ``set_requires_grad``): inside a whole-step
    graph's warm-up the step runs again from the flags it left, and its first backward has
    nothing to differentiate."""
    def over_parameters(loop):
        return isinstance(loop.iter, cst.Call) and any(is_method(loop.iter, None, m)
                                                       for m in ("parameters", "named_parameters"))

    def changes(node):
        for loop in nodes(node, (cst.For,)):
            if not over_parameters(loop):
                continue
            for assign in nodes(loop.body, (cst.Assign,)):
                if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "requires_grad"
                       for t in assign.targets):
                    return assign
            found = calls_in(loop.body, lambda c: is_method(c, None, "requires_grad_"))
            if found:
                return found[0]
        found = calls_in(node, lambda c: is_method(c, None, "requires_grad_") and dotted(c.func.value) in models)
        return found[0] if found else None

    for statement in statements:
        found = changes(statement)
        if found is not None:
            return found
        for call in calls_in(statement, lambda c: dotted(c.func) in functions) if depth else ():
            body = functions[dotted(call.func)]
            if body is not statement and requires_grad_change([body], functions, models, depth - 1) is not None:
                return call
    return None


HOST_SCALAR_CALLS = ("len", "bool", "random.random", "random.uniform", "random.randint", "random.choice")


def host_value_argument(statements, models: set, module, scope=None):
    """(call, what) for the first call of one of ``models`` in ``statements`` given a Python
    value as a positional argument: a literal, a loop counter, or a name bound only to a number
    or a flag computed on the host (``teacher_forcing = random.random() < 0.5``), as ``scope``
    (the function around the loop, or the module) binds it. A graphed forward takes CUDA
    tensors only and runs any other call eagerly: a seq2seq model given its teacher-forcing
    flag ran every step eagerly on the H100 (tune: ran-eagerly), where the profile had predicted
    fwd_bwd 3.60x. None where every argument may be a tensor."""
    scope = scope if scope is not None else module
    inner = [n for n in nodes(scope, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) if n is not scope]
    counters = varying_numbers(scope, skip=inner, module=module)
    known = number_constants(module) | set(counters)
    bound = {}
    for assign in _assignments(scope, skip=inner):
        for name in plain_target_names(assign.targets[0].target):
            bound.setdefault(name, []).append(assign.value if isinstance(assign.targets[0].target, cst.Name) else None)
    # bound some other way too, perhaps to a tensor: the function's parameter, the target of a
    # loop over anything but range() (or enumerate()'s index), a `with ... as`, an augmented assignment
    mine = nodes(scope, (cst.For, cst.WithItem, cst.AugAssign, cst.AnnAssign), skip=inner)
    unknown = {p.name.value for p in (scope.params.params + scope.params.kwonly_params + scope.params.posonly_params)
               } if isinstance(scope, cst.FunctionDef) else set()
    unknown |= {n for loop in mine if isinstance(loop, cst.For) for n in plain_target_names(loop.target)
                if n != loop_counter(loop)}
    unknown |= {n for item in mine if isinstance(item, cst.WithItem) and item.asname is not None
                for n in plain_target_names(item.asname.name)}
    unknown |= {n.target.value for n in mine if isinstance(n, (cst.AugAssign, cst.AnnAssign))
                and isinstance(n.target, cst.Name)}

    def host(expr, seen=frozenset()) -> bool:
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString)):
            return True
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None"):
                return True
            if expr.value in seen or expr.value in unknown:
                return False
            values = bound.get(expr.value, [])
            return ((bool(values) or expr.value in counters)   # a range() counter needs no assignment
                    and all(v is not None and host(v, seen | {expr.value}) for v in values))
        if isinstance(expr, cst.Comparison):
            return host(expr.left, seen) and all(host(c.comparator, seen) for c in expr.comparisons)
        if isinstance(expr, cst.BooleanOperation):
            return host(expr.left, seen) and host(expr.right, seen)
        if isinstance(expr, cst.UnaryOperation):
            return host(expr.expression, seen)
        if isinstance(expr, cst.Call) and dotted(expr.func) in HOST_SCALAR_CALLS:
            return True
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            return False   # `data.edge_index`, `batch[0]`: a tensor as often as not
        # arithmetic on numbers only: a name being resolved is not one (`images = (images - 0.5) / 0.5`)
        return is_number_expression(expr, known - seen - unknown)

    for statement in statements:
        for call in calls_in(statement, lambda c: dotted(c.func) in models):
            for arg in call.args:
                if arg.keyword is None and not arg.star and host(arg.value):
                    return call, code_of(arg.value)
    return None


def names_reaching(module, paths, seeds=()) -> set:
    """The names that reach one of the dotted ``paths`` (a class or function) in this file: the
    paths themselves and ``seeds``, their import aliases (``from torch.utils.checkpoint import
    checkpoint as ckpt``), the dotted paths through a module imported under another name
    (``import torch.nn.parallel as par``: ``par.DistributedDataParallel``), and the aliases made
    by assignment (``DDP = torch.nn.parallel.DistributedDataParallel``, annotated or not). A
    function of the script's own that shares a name is none of them."""
    names = set(paths) | set(seeds)
    aliases = []   # (alias, the dotted value it was assigned), in source order

    def bound(path: str, name: str) -> None:
        """``name`` is bound to the module or object at ``path``."""
        for full in paths:
            if full == path:
                names.add(name)
            elif full.startswith(path + "."):
                names.add(name + full[len(path):])

    class Imports(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> None:
            for alias in node.names:
                if alias.asname:   # `import torch.nn.parallel` binds torch, whose paths are in names
                    bound(dotted(alias.name), alias.evaluated_alias)

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if isinstance(node.names, cst.ImportStar) or node.relative or node.module is None:
                return
            for alias in node.names:
                bound(f"{dotted(node.module)}.{dotted(alias.name)}", alias.evaluated_alias or dotted(alias.name))

        def visit_Assign(self, node: cst.Assign) -> None:
            aliases.extend((dotted(t.target), dotted(node.value)) for t in node.targets
                           if isinstance(t.target, cst.Name) and dotted(node.value))

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            if isinstance(node.target, cst.Name) and node.value is not None and dotted(node.value):
                aliases.append((node.target.value, dotted(node.value)))

    module.visit(Imports())
    while True:   # an alias of an alias
        more = {alias for alias, value in aliases if value in names} - names
        if not more:
            return names
        names |= more


CHECKPOINTS = ("torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential")


def rng_checkpoints(module) -> list:
    """The calls of ``torch.utils.checkpoint``'s ``checkpoint`` or ``checkpoint_sequential`` in
    ``module`` (``names_reaching``) that keep the RNG state (no ``preserve_rng_state=False``).
    A function of the script named ``checkpoint`` that saves a file is none of them."""
    names = names_reaching(module, CHECKPOINTS)
    return calls_in(module, lambda call: dotted(call.func) in names and not any(
        a.keyword is not None and a.keyword.value == "preserve_rng_state" and dotted(a.value) == "False"
        for a in call.args))


def rebound_globals(module: cst.Module, names: set) -> list:
    """Of ``names`` (globals a captured step reads), those the script may bind anew while the
    step is replayed: bound twice or more at its top level, added to (``lr /= 4.0``), bound
    inside a top-level loop, or bound by a function under ``global``. A graph holds the value
    its capture read: the word-language-model example's hand-written update read ``lr`` after
    the learning rate had been divided by 4. Names the top level binds to a function, a class
    or an import are none of them."""
    counts: dict = {}
    fixed = set()

    def count(found, times: int = 1) -> None:
        for name in found:
            counts[name] = counts.get(name, 0) + times

    for statement in module.body:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            fixed.add(statement.name.value)
            continue
        skip = list(nodes(statement, (cst.FunctionDef, cst.ClassDef)))
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                    fixed.update((a.evaluated_alias or a.evaluated_name).split(".")[0] for a in small.names)
                elif isinstance(small, cst.AugAssign):
                    count(plain_target_names(small.target), 2)
            count(names_assigned(statement))
        elif isinstance(statement, (cst.For, cst.While)):
            count(names_rebound(statement, skip=skip), 2)
        else:
            count(names_rebound(statement, skip=skip))
            count({n for a in nodes(statement, cst.AugAssign) for n in plain_target_names(a.target)}, 2)
    declared = declared_global(module)
    return sorted(n for n in names if n in declared or n not in fixed and counts.get(n, 0) >= 2)


def declared_global(node) -> set:
    """Every name a ``global`` statement inside ``node`` names (the script, or one function):
    a function may rebind it."""
    return {n.name.value for g in nodes(node, cst.Global) for n in g.names}


def calls_on_one_path(statements, name: str) -> int:
    """The most calls of ``name`` that one pass through ``statements`` makes: the branches of
    an ``if`` are alternatives (the word-language-model example calls its model in the ``if``
    of a Transformer and in the ``else`` of an RNN, once an iteration), a loop inside counts
    its calls twice, as does a comprehension or a lambda, and a ``try``'s handler adds to its
    body (which may have called before it raised). Calls under
    ``no_grad`` count too: never fewer than the iteration makes with grad."""
    def named(call) -> bool:
        return dotted(call.func) == name

    def count(node) -> int:   # a call in a comprehension or a lambda runs any number of times: twice
        return len(calls_in(node, named)) + sum(len(calls_in(r, named)) for r in nodes(node, (*COMPREHENSIONS, cst.Lambda)))

    def branch(orelse) -> int:
        if orelse is None:
            return 0
        if isinstance(orelse, cst.If):   # elif
            return calls_on_one_path([orelse], name)
        return calls_on_one_path(orelse.body.body, name)

    total = 0
    for statement in statements:
        if isinstance(statement, cst.If):
            total += count(statement.test) + max(calls_on_one_path(statement.body.body, name), branch(statement.orelse))
        elif isinstance(statement, (cst.For, cst.While)):
            total += 2 * count(statement)
        elif isinstance(statement, cst.Try):
            handlers = [calls_on_one_path(h.body.body, name) for h in statement.handlers]
            total += (calls_on_one_path(statement.body.body, name) + max(handlers, default=0)
                      + branch(statement.orelse) + (count(statement.finalbody) if statement.finalbody else 0))
        elif isinstance(statement, cst.With):
            total += sum(count(item) for item in statement.items) + calls_on_one_path(statement.body.body, name)
        else:
            total += count(statement)
    return total
