"""Code a patch emits reads Python's builtins through ``_cg_builtins`` where the script rebinds them.

The helpers a patch adds are defined in the user's module, so they look builtins up through
its globals: the PyTorch seq2seq tutorial counts its loop with ``for iter in range(...)``, and
the fwd_bwd helper's ``iter(found)`` failed at the first capture with ``TypeError: 'int' object
is not callable`` (on the lent H200, bench/workloads/unseen_2026-11-30/). Where the script binds
a builtin the emitted code reads, that code reads it as ``_cg_builtins.NAME`` (``import
builtins as _cg_builtins``); everywhere else it stays as written, so an ordinary script's patch
is unchanged.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import symtable

import libcst as cst
from libcst.metadata import BuiltinAssignment, MetadataWrapper, ScopeProvider

ALIAS = "_cg_builtins"
IMPORT = f"import builtins as {ALIAS}\n"
# None, True and False are syntax; super() without arguments needs the compiler to see the bare
# name (the templates call torch.nn.Module.__init__ instead); a module's dunders are its own
BUILTIN_NAMES = frozenset(n for n in vars(builtins) if not keyword.iskeyword(n) and not n.startswith("__")
                          and n != "super")


def rebound_builtins(code: str, everywhere: bool = False) -> frozenset:
    """The builtins ``code`` binds at module level (assigned, a loop's target, imported, a def or
    class, or set through ``global`` in a function), which the emitted helpers' globals then
    hold; ``everywhere``: in any scope, for code emitted into the loop's own function. A star
    import may bind any of them: then all."""
    try:
        tree = ast.parse(code)
        top = symtable.symtable(code, "<script>", "exec")
    except (SyntaxError, ValueError):
        return frozenset()
    if any(isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names) for node in ast.walk(tree)):
        return BUILTIN_NAMES
    bound, tables = set(), [top]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for symbol in table.get_symbols():
            binds = symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace() or symbol.is_parameter()
            if binds and (everywhere or table is top or symbol.is_declared_global()):
                bound.add(symbol.get_name())
    return frozenset(bound & BUILTIN_NAMES)


def route_builtins(snippet: cst.Module, names: frozenset) -> tuple:
    """(``snippet`` with each read of a builtin in ``names`` that nothing in it binds made as
    ``_cg_builtins.NAME``, whether there was any). It cannot tell a builtin from a name of the
    user's spliced into the snippet (a model called ``input``): give it only the builtins the
    emitted text itself reads."""
    if not names:
        return snippet, False
    wrapper = MetadataWrapper(snippet)
    reads = {access.node for scope in set(wrapper.resolve(ScopeProvider).values()) if scope is not None
             for access in scope.accesses
             if isinstance(access.node, cst.Name) and access.node.value in names and access.referents
             and all(isinstance(r, BuiltinAssignment) for r in access.referents)}
    if not reads:
        return wrapper.module, False
    return wrapper.module.visit(_ThroughAlias(reads)), True


class _ThroughAlias(cst.CSTTransformer):
    """Each of the given ``cst.Name`` reads made ``_cg_builtins.NAME``."""

    def __init__(self, reads: set) -> None:
        self.reads = reads

    def leave_Name(self, original: cst.Name, updated: cst.Name):
        if original in self.reads:
            return cst.Attribute(value=cst.Name(ALIAS), attr=cst.Name(original.value))
        return updated
