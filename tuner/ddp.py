"""DistributedDataParallel in the user's script, as the rewrite needs it: which model of the
loop is the DDP wrapper, how it is built, and whether the loop skips the all-reduce with
``no_sync()``.

PyTorch's rules for a graph that holds NCCL collectives (async error handling off, DDP built
under a side stream, 11 eager iterations first) were followed by the first DDP rewrite of
``full_iteration``: on two H200 (torch 2.11) that capture hung, and make_graphed_callables'
global-mode capture (``fwd_bwd``, ``submodule``) was invalidated by NCCL's watchdog thread
(bench/results/ddp_h200.md). Those scopes are refused for a DDP model (tuner/patch.py); what
is left keeps the all-reduce outside the graph, done by the rewrite itself.
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


def uses_ddp(path, spec) -> bool:
    """Whether the loop ``spec`` found in the script at ``path`` trains a DDP-wrapped model."""
    from advisor.sourcefile import read_source

    models = spec.models or ([spec.model] if spec.model else [])
    module = cst.parse_module(read_source(path).text)
    return find_ddp(module, models, module) is not None
