"""DistributedDataParallel in the user's script, as the rewrite needs it: which model of the
loop is the DDP wrapper, how it is built, and whether the loop skips the all-reduce with
``no_sync()``.

Every graph scope builds DDP under a side stream (PyTorch's rule for graphs with DDP): DDP
keeps each parameter's gradient accumulator alive from its construction, and autograd runs an
accumulator on the stream current when it was made; made on the default stream, the captured
backward hands work to the default stream, which cannot join a capture. On two H200 (torch
2.11) every capture of a DDP step was invalidated that way until DDP was built on a side
stream (bench/ddp_capture_probe.py, bench/results/ddp_h200.md). The all-reduce stays outside
the graph: done by the rewrite after each replay, or by DDP's hooks after a graphed backward
of the wrapped module. The all-reduce inside the graph (NCCL async error handling off, 11
eager iterations first) hung there and is refused (tuner/patch.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from .dataflow import is_method, names_reaching
from .discover import calls_in, dotted

DDP_CLASS = "DistributedDataParallel"


@dataclass
class DdpModel:
    name: str            # the name the wrapper is bound to (``model``, ``self.model``)
    call: cst.Call       # DistributedDataParallel(...)
    find_unused: bool    # find_unused_parameters=True: DDP searches the graph on the host at every forward
    no_sync: bool        # the loop calls <name>.no_sync(): some backward passes do not all-reduce
    calls: tuple = ()    # every DistributedDataParallel(...) bound to the name, in source order


# where the class lives: a module imported under another name reaches it by the rest of its path
DDP_PATHS = (f"torch.nn.parallel.{DDP_CLASS}", f"torch.nn.parallel.distributed.{DDP_CLASS}")


def ddp_names(module: cst.Module) -> set:
    """The names that call DistributedDataParallel in this file (``names_reaching``): the class,
    its import aliases (``as DDP``), the dotted paths through ``torch`` and through a module
    imported under another name (``import torch.nn.parallel as par``), and the aliases made by
    assignment (``DDP = torch.nn.parallel.DistributedDataParallel``, annotated or not)."""
    return names_reaching(module, DDP_PATHS, (DDP_CLASS, f"nn.parallel.{DDP_CLASS}", f"parallel.{DDP_CLASS}"))


def calls_ddp(module: cst.Module) -> bool:
    """Whether the script builds a DistributedDataParallel anywhere (a helper that returns one
    included): a loop whose model find_ddp cannot trace back to it must not be graphed as if
    it were a plain module."""
    names = ddp_names(module)
    return bool(calls_in(module, lambda c: dotted(c.func) in names))


FSDP_CALLEES = ("FullyShardedDataParallel", "FSDP", "fully_shard")


def sharded(module: cst.Module) -> bool:
    """Whether the script shards a model with FSDP (the wrapper, or FSDP2's fully_shard)."""
    return bool(calls_in(module, lambda c: dotted(c.func).split(".")[-1] in FSDP_CALLEES))


def ddp_calls(module: cst.Module) -> list:
    """Every construction of a DistributedDataParallel in the file, in source order: bound to
    the loop's model or to another name, at module level or inside a function, one per branch
    of an if."""
    names = ddp_names(module)
    return calls_in(module, lambda c: dotted(c.func) in names)


def find_ddps(module: cst.Module, models: list, loop) -> list:
    """The DDP wrappers among the loop's ``models`` (a GAN wraps its generator and its
    discriminator), ordered by their last ``name = DistributedDataParallel(...)`` in the file.
    A model built in several places (the two branches of an if) counts as built with
    find_unused_parameters where any of its constructions is."""
    classes = ddp_names(module)
    found = {}

    def built(targets, value) -> None:
        if isinstance(value, cst.Call) and dotted(value.func) in classes:
            for name in map(dotted, targets):
                if name in models:
                    found[name] = found.pop(name, []) + [value]   # moved last: its latest construction

    class Assignments(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            built([t.target for t in node.targets], node.value)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:   # model: DDP = DDP(net)
            built([node.target], node.value)

    module.visit(Assignments())
    return [DdpModel(name, calls[-1], find_unused=any(finds_unused(call) for call in calls),
                     no_sync=bool(calls_in(loop, lambda c, name=name: is_method(c, name, "no_sync"))),
                     calls=tuple(calls))
            for name, calls in found.items()]


def untraced_ddps(module: cst.Module, models: list, ddps: list) -> tuple:
    """(models, calls): the DDP constructions of the file that are not bound to one of the
    loop's models found by find_ddps (a helper's ``return DDP(module)``, a teacher, a
    comprehension), and the loop's other models, any of which such a construction may have
    become (``netD = wrap(netD)``); both empty where every construction is traced."""
    traced = {id(call) for ddp in ddps for call in ddp.calls}
    calls = [call for call in ddp_calls(module) if id(call) not in traced]
    names = {ddp.name for ddp in ddps}
    return ([m for m in models if m not in names] if calls else []), calls


def finds_unused(call: cst.Call) -> bool:
    """Whether this construction passes find_unused_parameters (other than False)."""
    unused = next((a.value for a in call.args if a.keyword and a.keyword.value == "find_unused_parameters"), None)
    return unused is not None and dotted(unused) != "False"


def find_ddp(module: cst.Module, models: list, loop) -> Optional[DdpModel]:
    """The DDP wrapper among the loop's ``models``: the one whose ``name = DistributedDataParallel(...)``
    comes last in the file, or None where no model is one."""
    found = find_ddps(module, models, loop)
    return found[-1] if found else None


# what a construction deferred into ``lambda: DDP(...)`` would see or do otherwise than it does
# where it is: bind a name in the lambda (:=), be no expression in it (await, yield), or find no
# enclosing method's arguments (super(), locals(), vars())
_DEFERRED_ELSEWISE = {cst.NamedExpr: "binds a name with :=", cst.Await: "awaits", cst.Yield: "yields"}
_SCOPE_READERS = ("super", "locals", "vars")


def not_deferrable(call: cst.Call, parents) -> Optional[str]:
    """Why ``call`` (a DDP construction) cannot become ``lambda: <call>``, or None where it can:
    inside the lambda, an argument would read or bind names in another scope. ``parents`` is
    the module's ParentNodeProvider metadata."""
    kinds = set()

    class Kinds(cst.CSTVisitor):
        def on_visit(self, node) -> bool:
            kinds.add(type(node))
            return True

    call.visit(Kinds())
    why = next((why for kind, why in _DEFERRED_ELSEWISE.items() if kind in kinds), None)
    if why:
        return f"an argument {why}"
    if calls_in(call, lambda c: isinstance(c.func, cst.Name) and c.func.value in _SCOPE_READERS and not c.args):
        return "an argument calls super(), locals() or vars() without arguments, which a lambda answers otherwise"
    child, node = call, parents.get(call)
    while node is not None:
        if isinstance(node, (cst.FunctionDef, cst.Lambda)) and child is node.body:
            return None   # a function's own scope: a lambda in it sees its names
        if isinstance(node, cst.CompFor):
            around = parents.get(node)
            if child is node.iter and not isinstance(around, cst.CompFor):
                child, node = around, parents.get(around)   # a comprehension's first iterable: evaluated around it
                continue
            return None   # the comprehension's own scope
        if isinstance(node, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            return None   # its element, in the comprehension's scope
        if isinstance(node, cst.ClassDef) and child is node.body:
            return "it is built in a class body, whose names a lambda does not see"
        child, node = node, parents.get(node)
    return None   # module level


def built_on_side_stream(module: cst.Module) -> cst.Module:
    """Every ``x = DDP(net, ...)`` in the file -> ``x = _cg_on_side_stream(lambda: DDP(net, ...))``:
    the loop's model in each place it is built (an if's two branches, a function), and any other
    DDP module (a GAN's discriminator, a teacher), whose accumulators the graphed backward may
    reach as well."""
    classes = ddp_names(module)

    class Wrap(cst.CSTTransformer):
        def leave_Call(self, original, updated):
            if dotted(original.func) not in classes:
                return updated
            return cst.Call(func=cst.Name("_cg_on_side_stream"),
                            args=[cst.Arg(cst.Lambda(params=cst.Parameters(), body=updated))])

    return module.visit(Wrap())


SIDE_STREAM = '''

def _cg_on_side_stream(build):
    """cg-advise: DistributedDataParallel built under a side stream, so that the gradient
    accumulators it keeps run off the default stream, which a captured backward cannot use;
    as it was without a GPU."""
    if not torch.cuda.is_available():
        return build()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        built = build()
    torch.cuda.current_stream().wait_stream(side)
    return built
'''

# the model a fwd_bwd or submodule rewrite graphs: what DDP wraps, found when the setup runs, so
# that a model wrapped on one branch only (`model = DDP(net)` under torchrun, `model = net` in a
# plain run) or by a helper (`netD = wrap(netD)`) is graphed as what that run built
UNWRAPPED = '''

def _cg_unwrapped(model):
    """cg-advise: the module to graph for `model`: the module it wraps where it is
    DistributedDataParallel (DDP's hooks, armed by its own forward, then all-reduce after the
    graphed backward), `model` itself where it is not (a run or branch without DDP)."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return model.module
    return model
'''

# full_iteration_allreduce_outside's `allreduce=`: the DDP model, or None on a path that did not wrap it
IF_DDP = '''

def _cg_if_ddp(model):
    """cg-advise: `model` where it is DistributedDataParallel, whose all-reduce then runs after
    each replay; None where it is not (a run or branch without DDP), which has none to run."""
    return model if isinstance(model, torch.nn.parallel.DistributedDataParallel) else None
'''


def uses_ddp(path, spec) -> bool:
    """Whether the loop ``spec`` found in the script at ``path`` trains a DDP-wrapped model."""
    from advisor.sourcefile import read_source

    models = spec.models or ([spec.model] if spec.model else [])
    module = cst.parse_module(read_source(path).text)
    return find_ddp(module, models, module) is not None
