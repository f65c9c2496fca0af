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

from .dataflow import is_method
from .discover import calls_in, dotted

DDP_CLASS = "DistributedDataParallel"


@dataclass
class DdpModel:
    name: str            # the name the wrapper is bound to (``model``, ``self.model``)
    call: cst.Call       # DistributedDataParallel(...)
    find_unused: bool    # find_unused_parameters=True: DDP searches the graph on the host at every forward
    no_sync: bool        # the loop calls <name>.no_sync(): some backward passes do not all-reduce


def ddp_names(module: cst.Module) -> set:
    """The names that call DistributedDataParallel in this file: the class, its import
    aliases (``as DDP``) and the dotted paths through ``torch``."""
    names = {DDP_CLASS, f"torch.nn.parallel.{DDP_CLASS}", f"nn.parallel.{DDP_CLASS}", f"parallel.{DDP_CLASS}"}

    class Imports(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            if isinstance(node.names, cst.ImportStar):
                return
            for alias in node.names:
                if dotted(alias.name) == DDP_CLASS and alias.asname:
                    names.add(alias.evaluated_alias)

    module.visit(Imports())
    return names


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


def find_ddp(module: cst.Module, models: list, loop) -> Optional[DdpModel]:
    """The DDP wrapper among the loop's ``models``: the last ``name = DistributedDataParallel(...)``
    in the file for one of them, or None where no model is one."""
    classes = ddp_names(module)
    found = []

    class Assignments(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if isinstance(node.value, cst.Call) and dotted(node.value.func) in classes:
                for target in node.targets:
                    if dotted(target.target) in models:
                        found.append((dotted(target.target), node.value))

    module.visit(Assignments())
    if not found:
        return None
    name, call = found[-1]
    unused = next((a.value for a in call.args if a.keyword and a.keyword.value == "find_unused_parameters"), None)
    return DdpModel(name, call, find_unused=unused is not None and dotted(unused) != "False",
                    no_sync=bool(calls_in(loop, lambda c: is_method(c, name, "no_sync"))))


def built_on_side_stream(module: cst.Module, ddp: DdpModel) -> cst.Module:
    """``model = DDP(net, ...)`` -> ``model = _cg_on_side_stream(lambda: DDP(net, ...))``."""

    class Wrap(cst.CSTTransformer):
        def leave_Call(self, original, updated):
            if not original.deep_equals(ddp.call):
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


def uses_ddp(path, spec) -> bool:
    """Whether the loop ``spec`` found in the script at ``path`` trains a DDP-wrapped model."""
    from advisor.sourcefile import read_source

    models = spec.models or ([spec.model] if spec.model else [])
    module = cst.parse_module(read_source(path).text)
    return find_ddp(module, models, module) is not None
