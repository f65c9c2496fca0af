"""A training step that the loop calls as a function of the script: ``loss = train_step(model,
optimizer, x, y)`` in a loop, or PyTorch Geometric's ``loss = train()`` once an epoch. The
full-iteration rewrite captures the call whole (the function is the step) instead of the
loop's statements. It may only where one replay of the captured call does what a call does:

- the function holds the step, unconditionally: backward and the optimizer step at its top
  level (or in a ``with``), nothing before them it could skip, no early return;
- it reads nothing on the host (``.item()``, ``float(loss)``, ``print``), keeps no Python
  state (a counter, a list it appends to: both would run once, at capture), reads no host
  data (``next(it)``, ``random``) and copies nothing from the host (a batch moved with
  ``.to(device)`` inside it), since a graph holds none of that;
- what it reads that changes between calls reaches it as an argument, which the helper copies
  into the graph's buffers: a global the loop binds again, or a Python number that changes
  every call (the loop's counter), would be baked in at capture;
- its gradients are zeroed at every call, by it or by the loop before it (else they add up
  over calls: accumulation, which a graph that writes them afresh would lose).

``model.train()`` and ``model.eval()`` in it run on the host only: the call site makes them
again before each replay, so that the model's flags are the eager run's.

Where the call cannot be captured whole because the function does host work around its step
(Kipf's pygcn ``train(epoch)`` evaluates and prints after its optimizer step), its own step
statements are captured as a loop body's are (``tuner.patch._Rewriter._captured_in_function``),
if its models and optimizers are globals that nothing binds again once it has run.
"""

from __future__ import annotations

import builtins
from typing import Optional

import libcst as cst

from .dataflow import (MOVE_METHODS, has_sync, host_data_call, host_value_binding, is_docstring, is_method,
                       changes_structure, names_assigned, names_rebound, names_read, parameter_names, plain_target_names, root_name,
                       zeroes_grads)
from .discover import calls_backward, calls_in, code_of, dotted, host_call, nodes

MODE_METHODS = ("train", "eval")
HOST_CASTS = ("float", "int", "bool")   # float(loss): a host read of a tensor, as .item()


class NotAStep(Exception):
    """The loop's call is not a step function that a graph can hold whole: why, in words."""


# step_call's targets where the call is a part of its statement (``losses.append(step(x))``)
EMBEDDED = "embedded"
# where a call may run other than once per statement, or not at all
NOT_ONCE = (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp, cst.IfExp, cst.BooleanOperation)


def step_call(statement, functions=()) -> Optional[tuple]:
    """(targets or None, the call) where ``statement`` is ``[targets =] name(args)`` alone on
    its line; for ``total += name(args)`` the targets are the AugAssign itself; (EMBEDDED, the
    call) where the statement runs one call of a function of ``functions`` as a part of it, once
    (``losses.append(step(x))``, ``total += float(step(x))``); else None."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return None
    small = statement.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        value, targets = small.value, small.targets[0].target
    elif isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Name):
        value, targets = small.value, small
    elif isinstance(small, cst.Expr):
        value, targets = small.value, None
    else:
        return None
    if isinstance(value, cst.Call) and (isinstance(value.func, cst.Name) and not functions
                                        or dotted(value.func) in functions):
        return targets, value
    if not functions or nodes(small, NOT_ONCE):
        return None
    inner = calls_in(small, lambda c: dotted(c.func) in functions)
    return (EMBEDDED, inner[0]) if len(inner) == 1 else None


def bind_arguments(function: cst.FunctionDef, call: cst.Call) -> dict:
    """Parameter name -> the call's argument (a cst expression) for each parameter the call
    passes; NotAStep where the call or the signature needs more than plain binding (``*args``,
    ``**kwargs``, an argument the function has no parameter for)."""
    params = function.params
    if params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or params.star_kwarg is not None \
            or params.posonly_params:
        raise NotAStep(f"{function.name.value}() takes *args, **kwargs or positional-only parameters")
    names = [p.name.value for p in params.params]
    keywords = set(parameter_names(function))
    bound = {}
    for i, arg in enumerate(call.args):
        if arg.star:
            raise NotAStep(f"the call of {function.name.value}() unpacks its arguments (*, **)")
        if arg.keyword is None:
            if i >= len(names):
                raise NotAStep(f"the call passes {function.name.value}() more arguments than it takes")
            bound[names[i]] = arg.value
        elif arg.keyword.value in keywords:
            bound[arg.keyword.value] = arg.value
        else:
            raise NotAStep(f"{function.name.value}() has no parameter {arg.keyword.value!r}")
    return bound


def check_body(function: cst.FunctionDef, receivers: set, functions: dict, zeroed_before: bool) -> None:
    """NotAStep unless the function's body is a step one replay can stand for (the module's
    docstring lists what that takes). ``receivers``: the names (in the function) of the
    optimizers and models whose ``zero_grad`` clears the gradients; ``zeroed_before``: the
    loop zeroes them before the call on every iteration."""
    name = function.name.value
    if function.asynchronous is not None or function.decorators:
        raise NotAStep(f"{name}() is decorated or async")
    body = list(function.body.body)
    if nodes(function.body, (cst.Global, cst.Nonlocal)):
        raise NotAStep(f"{name}() rebinds a name outside itself (global, nonlocal): Python state a graph runs once")
    if nodes(function.body, (cst.Yield, cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        raise NotAStep(f"{name}() defines functions or yields")
    returns = list(nodes(function.body, cst.Return))
    last = body[-1] if body else None
    if any(not (isinstance(last, cst.SimpleStatementLine) and r in last.body) for r in returns):
        raise NotAStep(f"{name}() may return early; a captured step runs whole at every replay")
    found = next((c for c in calls_in(function.body, lambda c: True) if _host_read(c) or host_call(c)), None)
    if found is not None:
        what = code_of(found.func)
        what = f".{found.func.attr.value}()" if isinstance(found.func, cst.Attribute) else f"{what}()"
        raise NotAStep(f"{name}() reads a value on the host ({what}); a capture cannot wait for the GPU: return "
                       "the tensor and read it after the call")
    if host_data_call(body, functions):
        raise NotAStep(f"{name}() reads host data (an iterator, Python's random): a graph would replay its first value")
    moved = [c for c in calls_in(function.body, lambda c: isinstance(c.func, cst.Attribute)
                                 and c.func.attr.value in MOVE_METHODS)]
    if moved:
        raise NotAStep(f"{name}() moves tensors with .{moved[0].func.attr.value}() inside the step; a capture cannot "
                       "copy from the host: move the batch before the call")
    made = set().union(*map(names_assigned, body))
    for statement in nodes(function.body, (cst.If, cst.While, cst.For, cst.Try)):
        if calls_backward(statement) or _steps(statement) or zeroes_grads_in(statement, receivers):
            raise NotAStep(f"{name}() runs backward, the optimizer step or zero_grad conditionally or in a loop; "
                           "a captured step needs one of each at every call")
        if not isinstance(statement, cst.For) and names_read(getattr(statement, "test", cst.Name("_"))) & made:
            raise NotAStep(f"{name}() branches on a value it computes; a graph holds one branch")
    if _sets_outside(function.body, made):   # in blocks too (a `with autocast()`)
        raise NotAStep(f"{name}() sets an attribute or an item (Python state a graph sets once)")
    effect = state_keeping_call(function.body, functions)
    if effect is not None:
        raise NotAStep(f"{name}() calls {dotted(effect.func)}(), Python-side work a graph would run once, at capture")
    backwards = [i for i, s in enumerate(body) if calls_backward(s)]
    steps = [i for i, s in enumerate(body) if _steps(s)]
    if len(backwards) != 1 or not steps or steps[0] < backwards[0]:
        raise NotAStep(f"{name}() does not run one backward() followed by the optimizer step")
    zeroed = any(zeroes_grads(s, receivers) for s in body[:backwards[0]])
    if not (zeroed or zeroed_before):
        raise NotAStep(f"neither {name}() nor the loop zeroes the gradients before its backward at every call "
                       "(they add up over calls: gradient accumulation), which a graph writing them afresh would lose")


def returned_host_read(function: cst.FunctionDef) -> Optional[tuple]:
    """(the value, the names it reads) where the function ends in ``return <value>`` that
    reads tensors on the host (``float(loss)``, ``loss.item()``, ``(loss.item(), acc)``) and
    reads only names the function binds: the loop can read them after the replay. Else None."""
    last = function.body.body[-1] if function.body.body else None
    if not (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return)
            and last.body[0].value is not None):
        return None
    value = last.body[0].value
    if not (has_sync(value) or calls_in(value, _host_read)):
        return None
    made = set().union(*map(names_assigned, function.body.body[:-1]))
    names = sorted(names_read(value) & made)
    others = names_read(value) - made   # float, round: builtins only, no argument or global
    return (value, names) if names and all(hasattr(builtins, n) for n in others) else None


def without_return_read(function: cst.FunctionDef, name: str, names: list) -> cst.FunctionDef:
    """A copy of ``function`` named ``name`` that returns ``names`` (the tensors its last
    ``return`` read on the host) in place of that value."""
    returned = cst.parse_statement(f"return {', '.join(names)}\n")
    doc = cst.parse_statement(f'"""{function.name.value}() up to its return value, captured whole by cg-advise\n'
                              '    (scope full_iteration); the loop reads the value after each replay."""\n')
    body = list(function.body.body)
    body = [doc] + body[1 if is_docstring(body[0]) else 0:-1] + [returned.with_changes(leading_lines=body[-1].leading_lines)]
    return function.with_changes(name=cst.Name(name), body=function.body.with_changes(body=body),
                                 leading_lines=[cst.EmptyLine(indent=False)])


def state_keeping_call(node, functions: dict, depth: int = 2) -> Optional[cst.Call]:
    """The first call in ``node`` that keeps Python state, which a graph runs once, at capture:
    a method call standing as a statement of its own (``losses.append(loss)``, in a block too)
    that is no tensor's in-place op and none of the step's own, or a call of the script's own
    function that sets an attribute, an item or a global, or makes such a call, ``depth`` deep
    (``record(loss)`` appending to a global list). None where there is none."""
    for expr in nodes(node, cst.Expr):
        if isinstance(expr.value, cst.Call) and _keeps_state(expr.value):
            return expr.value
    for call in calls_in(node, lambda c: isinstance(c.func, cst.Name) and c.func.value in functions):
        inner = functions[call.func.value]
        if inner is node:
            continue
        sets = _sets_outside(inner.body, set().union(*map(names_assigned, inner.body.body)))
        if sets or nodes(inner.body, (cst.Global, cst.Nonlocal)) or (depth and state_keeping_call(inner.body, functions,
                                                                                                  depth - 1)):
            return call
    return None


def stores_into_argument(function: cst.FunctionDef, functions: Optional[dict] = None) -> Optional[str]:
    """How the function changes an argument otherwise than through its tensors' values
    (``losses += [loss]``, ``batch["pred"] = out``, ``batch.pop("labels")``, ``y.unsqueeze_(1)``,
    through a part of it too: ``changes_structure``), as its source, or None: a graph would
    change the copy it was handed, at its warm-up and capture only. A change of an argument's
    tensors in place (``x.mul_(0.5)``, ``x[:, 0] = 0``, ``images /= 255``) is copied back instead
    (``changed_in_place``). ``functions``: the script's own, followed where the argument is
    handed on (``changes_structure``)."""
    node = changes_structure(function.body.body, set(parameter_names(function)), functions)
    return code_of(node).strip() if node is not None else None


def step_receivers(function: cst.FunctionDef) -> list:
    """The names whose ``.step()`` the function calls: its optimizers (as it names them)."""
    return list(dict.fromkeys(dotted(c.func.value) for c in calls_in(function.body, lambda c: is_method(c, None, "step"))
                              if dotted(c.func.value)))


def function_models(function: cst.FunctionDef, bound: dict, models: list, own: Optional[str] = None) -> list:
    """The models discovery named (as the calling loop names them) as the function names them
    and calls them: the parameter an argument is handed to (``train_step(net, ...)``'s
    ``model``), or the global itself; for a method called on the loop's own object (``own``:
    ``self``), its attribute (``self.model``)."""
    called = {dotted(c.func).split(".")[0] for c in calls_in(function.body, lambda c: True)}
    params = set(parameter_names(function)) - {own}
    inside = [p for p, value in bound.items() if dotted(value) in models]
    inside += [m for m in models if m and m.split(".")[0] not in params]
    return [m for m in dict.fromkeys(inside) if m.split(".")[0] in called]


def refuse_returned_values(function: cst.FunctionDef) -> None:
    """NotAStep unless the function returns nothing, or what it makes from names it binds
    (``loss``, ``loss.detach()``, ``outputs.logits``: tensors the replay writes again): a Python value (``opt.param_groups[0]["lr"]``, a count) keeps its capture's
    value, and a parameter handed back is the graph's copy."""
    last = function.body.body[-1] if function.body.body else None
    if not (isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[0], cst.Return)
            and last.body[0].value is not None):
        return
    value = last.body[0].value
    items = ([e.value for e in value.elements] if isinstance(value, cst.Tuple) else
             [e.value for e in value.elements] if isinstance(value, cst.Dict)
             else [value])   # a Trainer's `return {"loss": loss.detach(), "acc": acc}`: its values
    made = set().union(*map(names_assigned, function.body.body[:-1]))
    plain = next((i for i in items if root_name(i) not in made), None)
    if plain is not None:   # opt.param_groups[0]["lr"], len(batch): not made from what it computes
        raise NotAStep(f"it returns {code_of(plain)}, which a replay cannot update (return "
                       "tensors it computes)")
    for item in items:
        binding = host_value_binding(function.body.body, root_name(item)) or _read_from_outside(
            function.body.body, root_name(item), made - {root_name(item)})
        if binding is not None:
            raise NotAStep(f"it returns {root_name(item)}, a Python value a replay cannot update")


def _read_from_outside(statements, name: str, made: set):
    """The assignment that binds ``name`` to what the function computes, with no call, from
    nothing it made (``lr = opt.param_groups[0]["lr"]``, ``w = self.scale * 2``): a value of the
    host as likely as a tensor, which a replay hands back as its capture read it. Else None."""
    for assign in (a for statement in statements for a in nodes(statement, cst.Assign)):
        if (any(name in plain_target_names(t.target) for t in assign.targets)
                and not calls_in(assign.value, lambda c: True) and not names_read(assign.value) & made):
            return assign
    return None


def bound_from(module: cst.Module, start: int, stop: Optional[int] = None) -> set:
    """The names the module's top-level statements ``start`` to ``stop`` bind, inside their
    blocks too but not in the functions and classes they define (whose names count)."""
    names = set()
    for statement in module.body[start:stop]:
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            names.add(statement.name.value)
        elif isinstance(statement, cst.SimpleStatementLine):
            names |= names_assigned(statement)
        else:
            names |= names_rebound(statement, skip=list(nodes(statement, (cst.FunctionDef, cst.ClassDef))))
    return names


def set_through(node) -> set:
    """The names whose attribute or item ``node`` sets (``cfg.scale = ...``, ``cfg["lr"] += ...``)."""
    found = set()
    for assign in nodes(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        for target in (assign.targets if isinstance(assign, cst.Assign) else [assign]):
            if isinstance(target.target, (cst.Attribute, cst.Subscript)):
                found.add(root_name(target.target))
    return found - {None}


def _sets_outside(node, made: set) -> bool:
    """Whether ``node`` sets an attribute or an item of something it did not make (``made``:
    the names it binds): Python state outside it, which a graph would set once, at capture."""
    return any(not isinstance(t.target, (cst.Name, cst.Tuple, cst.List)) and root_name(t.target) not in made
               for a in nodes(node, (cst.Assign, cst.AugAssign, cst.AnnAssign))
               for t in (a.targets if isinstance(a, cst.Assign) else [a]))


def mode_calls(function: cst.FunctionDef) -> list:
    """The function's top-level ``X.train()`` and ``X.eval()`` statements."""
    return [s for s in function.body.body if isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
            and isinstance(s.body[0], cst.Expr) and isinstance(s.body[0].value, cst.Call)
            and any(is_method(s.body[0].value, None, m) for m in MODE_METHODS)]


def free_names(function: cst.FunctionDef) -> set:
    """The names the function reads but neither takes as a parameter nor binds: its globals."""
    params = set(parameter_names(function))
    return names_read(function.body) - params - set().union(*map(names_assigned, function.body.body))


def zeroes_grads_in(node, receivers) -> bool:
    return bool(calls_in(node, lambda c: any(is_method(c, r, "zero_grad") for r in receivers if r)))


def _steps(node) -> bool:
    return bool(calls_in(node, lambda c: is_method(c, None, "step")))


def read_at_once(statement, call: cst.Call) -> bool:
    """Whether ``statement`` reads ``call``'s result on the host as soon as it is made
    (``float(call)``, ``call.item()``): nothing keeps a replay's output past it."""
    return any((_host_read(c) and c.args[0].value is call)
               or (is_method(c, None, "item") or is_method(c, None, "tolist")) and c.func.value is call
               for c in calls_in(statement, lambda c: True))


def _host_read(call: cst.Call) -> bool:
    """``float(loss)``, ``int(correct)``: a tensor read on the host (a literal's cast is none)."""
    return (isinstance(call.func, cst.Name) and call.func.value in HOST_CASTS and len(call.args) == 1
            and not isinstance(call.args[0].value, (cst.Integer, cst.Float, cst.SimpleString)))


def _keeps_state(call: cst.Call) -> bool:
    """A method call as a statement of its own that is neither a tensor's in-place op, nor the
    step's own (backward, step, zero_grad, train, eval), nor a torch function: ``losses.append``."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return isinstance(func, cst.Name) and func.value in ("print", "setattr")
    method, root = func.attr.value, dotted(func.value).split(".")[0]
    return not (method.endswith("_") or method in ("backward", "step", "zero_grad", *MODE_METHODS)
                or root in ("torch", "nn", "F"))
