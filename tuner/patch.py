"""Rewrites the user's training loop to use one capture scope, with libcst so that comments
and formatting survive; the result is checked before anyone sees it.

Scopes of a training loop: ``full_iteration`` (the step's statements become a function
captured whole), ``fwd_bwd`` (the model's forward and backward graphed), ``submodule`` (each
top-level child graphed), ``compile`` (``torch.compile(mode="reduce-overhead")``). Of an
inference loop: ``forward`` (a graph per batch-size bucket) and ``compile``.

A model wrapped in DistributedDataParallel, always built under a side stream (tuner/ddp.py):
``full_iteration_allreduce_outside`` captures forward and backward under ``no_sync()`` and
all-reduces the gradients eagerly before the optimizer step; ``fwd_bwd`` and ``submodule``
graph the wrapped module (``model.module``), so DDP's own hooks all-reduce after the graphed
backward. Whether a model is DDP is decided when the rewrite's setup runs (``_cg_unwrapped``,
``_cg_if_ddp``): a script may wrap it on one branch only (under torchrun, not in a plain run),
or through a helper of its own. ``full_iteration`` with the all-reduce in the graph hung on two
GPUs and is refused (``DDP_FAILED_ON_GPU``); a graphed DDP wrapper itself would not all-reduce
at all on replay: DDP's Python, which arms its hooks, never runs.
"""

from __future__ import annotations

import ast
import difflib
import functools
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import libcst as cst
from pyflakes.checker import Checker
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from advisor.errors import CgAdviseError
from advisor.sourcefile import SourceFile, read_source

from .dataflow import (MOVE_METHODS, backward_passes, calls_on_one_path, declared_global, calls_through, data_dependent_shape, double_backward, has_sync, host_data_call, host_number_read, host_tensor_copy, host_value_argument,
                       hoist_picks, host_value_binding, indexed_by, is_bookkeeping, is_exit_guard, rng_checkpoints, safe_pick_containers, is_host_method_call, is_loading, is_method,
                       is_docstring, is_number_expression, is_prefetch, keyed_path, keyed_paths_read, number_constants, paths_read,
                       keeps_output, keeps_reference, leaves_iteration, live_reads, model_outputs, names_assigned, names_read, names_rebound, parameter_names, plain_target_names, read_first,
                       requires_grad_change, rnn_module, sparse_use, step_start, varying_numbers,
                       zeroes_grads, changed_in_place, changes_structure, gradient_of_input, handed_to_functions, host_draw, root_name, host_scalar, STORE_METHODS, CONTAINER_METHODS,
                       made_inside_models, stateful_forward, forward_attributes, objects_called, rebound_globals, self_methods)
from .ddp import (IF_DDP, SIDE_STREAM, UNWRAPPED, built_on_side_stream, calls_ddp, ddp_calls, find_ddps, finds_unused,
                  not_deferrable, sharded, untraced_ddps)
from .discover import NO_GRAD, StepSpec, _Assignments, calls_backward, calls_in, code_of, discover, dotted, nodes, script_functions
from .harness import COMPILE_MARK
from .hints import checked_hints
from .hygiene import IMPORT as BUILTINS_IMPORT, rebound_builtins, route_builtins
from .search import ALLREDUCE_OUTSIDE, scopes_for
from .step_function import (EMBEDDED, NotAStep, bind_arguments, bound_from, stores_into_argument, check_body, free_names,
                            function_models, mode_calls, refuse_returned_values,
                            read_at_once, returned_host_read, set_through, state_keeping_call, step_call, step_receivers,
                            without_return_read)
from .templates import HELPERS

NOT_GLOBAL = "its optimizer or model is not a global"   # why a step function's own body is not rewritten
PATCH_SCOPES = ("submodule", "fwd_bwd", "full_iteration", ALLREDUCE_OUTSIDE, "compile", "forward")
# scopes whose capture failed under DDP on the GPU (bench/gpu_ddp.py; bench/results/ddp_h200.md)
DDP_FAILED_ON_GPU = {
    "full_iteration": "capturing its all-reduce inside the graph hung before the first replay",
}
# the graph scopes offered under DDP; each needs DDP built under a side stream (tuner/ddp.py)
DDP_GRAPH_SCOPES = (ALLREDUCE_OUTSIDE, "fwd_bwd", "submodule")
# what in a statement may launch GPU work: a call, or an operator on tensors (`(x - mean) / std`)
TENSOR_WORK = (cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.Comparison)
# the torch.optim classes whose constructor takes ``capturable`` (each torch >= 2.1): their step
# goes inside a full-iteration graph, built capturable. Not Adagrad, which has no such argument:
# a rewrite that passed it failed at its first line on the H200 (TypeError), and its step, whose
# count stays on the host, runs eagerly after the replay like any class not named here
CAPTURABLE_OPTIMIZERS = ("Adam", "AdamW", "NAdam", "RAdam", "Adamax", "ASGD", "Rprop", "RMSprop", "Adadelta")


# a full-iteration graph of a step that builds torch.distributions objects: their argument checks
# read the GPU on the host (``constraint.check(value)`` when built, the value in ``log_prob``), a
# sync, which broke a REINFORCE step's capture on the H200; the rewrite turns the default off
# before the loop, for every object the script builds (in its model's methods, before the loop,
# a subclass of its own), those built before that line too, whose default is read at each check
NO_ARGUMENT_CHECKS = ("torch.distributions.Distribution.set_default_validate_args(False)  "
                      "# cg-advise: checks sync the host\n")


class PatchRefused(CgAdviseError):
    pass


@dataclass
class Patch:
    path: str
    scope: str
    original: str
    patched: str
    source: Optional[SourceFile] = None   # how the file was read: encoding, BOM, bytes
    optimizer_eager: bool = False         # full_iteration with the optimizer step left out of the graph
    zero_grad_in_graph: bool = False      # full_iteration took the loop's zero_grad statement out of the
                                          # loop (the graph's backward writes the gradients afresh)
    per_micro_step: bool = False          # full_iteration of gradient accumulation: a graph of one micro-step,
                                          # replayed at each, the optimizer step eager after them
    prepared_share: float = 0.0           # full_iteration's graph begins with statements before the first model
                                          # call (augmentation, noise drawn on the GPU): their share of the
                                          # statements that do work after the batch's copy, whose
                                          # launches an eager trace shows between iterations
    models: list = field(default_factory=list)   # fwd_bwd, submodule, compile: the models it graphs (named as
                                                 # the loop names them); a model called twice stays eager
    compile_eager: str = ""   # compile: what it runs eagerly, without CUDA graphs (a sparse operation, an RNN module)
    helper_inputs: Optional[int] = None   # full_iteration: the names the loop hands the helper at each replay
                                          # (the batch it copies into the graph's buffers; 0: none changes)

    @property
    def steps_optimizer_in_graph(self) -> bool:
        """Whether the rewrite's graph holds the optimizer step, so builds the optimizer
        capturable: full_iteration, unless it leaves the step eager."""
        return self.scope.startswith("full_iteration") and not self.optimizer_eager

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
    """The rewrite of ``path``'s loop for ``scope``, or ``PatchRefused`` saying why not; a
    refusal's advice to try another scope is checked first (``tuner.hints``)."""
    path = Path(path)
    if scope not in PATCH_SCOPES:
        raise PatchRefused(f"unknown scope {scope!r} (choose from {', '.join(PATCH_SCOPES)})")
    source = read_source(path)
    spec = spec or discover(path, source.text, step)
    try:
        return _make_patch(path, scope, source, spec)
    except PatchRefused as refusal:
        checked = checked_hints(str(refusal), scope, PATCH_SCOPES,
                                lambda other: _refusal_reason(path, other, source, spec))
        if checked == str(refusal):
            raise
        raise PatchRefused(checked) from None


def _refusal_reason(path: Path, scope: str, source: SourceFile, spec: StepSpec) -> Optional[str]:
    """Why ``scope`` refuses the loop (its message after "cannot apply <scope>: "), None where
    it applies, or where trying it failed otherwise: a hint is then left as it is, and the
    refusal being checked is still the one the user gets."""
    try:
        _make_patch(path, scope, source, spec)
    except PatchRefused as refusal:
        return str(refusal).split(f"cannot apply {scope}: ", 1)[-1]
    except Exception:  # noqa: BLE001 - the hint stays unchecked; never a crash in place of a refusal
        return None
    return None


def _make_patch(path: Path, scope: str, source: SourceFile, spec: StepSpec) -> Patch:
    original = source.text
    module = _parse(path, original)
    if module.code != original:
        raise PatchRefused(f"{path}: libcst does not round-trip this file exactly; refusing to rewrite it")
    rewriter = _Rewriter(spec, scope, path)
    patched = _same_line_endings(original, rewriter.apply(module).code)
    check(path, original, patched)
    # a graph of one micro-step leaves the optimizer step out too: it steps after the micro-steps
    return Patch(str(path), scope, original, patched, source, rewriter.optimizer_outside or rewriter.per_micro_step,
                 rewriter.zero_grad_dropped, rewriter.per_micro_step, rewriter.prepared_share, rewriter.models,
                 rewriter.compile_eager, rewriter.helper_inputs)


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


def installed_torch_version() -> Optional[tuple]:
    """(major, minor) of the torch this process would import, without importing it; None where
    none is installed or the version does not read as numbers."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return tuple(int(part) for part in version("torch").split("+")[0].split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return None


class _Rewriter:
    def __init__(self, spec: StepSpec, scope: str, path: Path):
        self.spec, self.scope, self.path = spec, scope, path
        self.optimizer_outside = False
        self.zero_grad_dropped = False   # a zero_grad statement of the loop went (not with micro-steps)
        self.per_micro_step = False      # full_iteration captured one micro-step of gradient accumulation
        self.prepared_share = 0.0        # full_iteration: of the calls after the batch's copy, those it captured
        self.models = []                 # the models a module scope applies to
        self.compile_eager = ""          # compile: what its graphs leave to eager (``_check_sparse``)
        self.builtins_routed = False     # emitted code reads a builtin the script rebinds (tuner.hygiene)
        self.helper_inputs = None        # full_iteration: the names passed to the helper's call
        self.step_params = []            # full_iteration in a step function: its parameters, inputs of the step
        self.function_rewrite = None     # (the step function, what replaces it) where its own body is rewritten
        self.ddp = None   # the loop's DDP model built last in the file
        self.ddps = []    # every DDP model of the loop (a GAN's generator and discriminator)
        self.maybe_ddps = []   # the loop's other models, where a DDP the file builds may be one (`netD = wrap(netD)`)

    def _loop_class(self, outer) -> Optional[cst.ClassDef]:
        """The class whose method holds the loop ``outer``, or None."""
        node = self.parents.get(outer)
        while node is not None and not isinstance(node, cst.ClassDef):
            node = self.parents.get(node)
        return node

    def _own_methods(self, outer) -> dict:
        """``self.<name>`` -> the method, for the methods of the class whose method holds the
        loop (a trainer's ``self.info_nce_loss(features)``): the step's calls of them are
        followed as a function's are."""
        cls = self._loop_class(outer)
        return self_methods(cls) if cls is not None else {}

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
        self.module = wrapper.module
        self.functions = script_functions(self.module)   # name -> the script's own function
        self.functions.update(self._own_methods(outer))
        self._check_ddp(loop)
        allowed = scopes_for(self.spec.kind, self.ddp is not None)
        if self.scope not in allowed:
            raise self.refuse(f"this is {'an inference' if self.spec.kind == 'inference' else 'a training'} loop; "
                              f"its scopes are {', '.join(allowed)}")
        self._check_sparse(loop)
        if not self.scope.startswith("full_iteration"):
            self._check_double_backward(loop)
        if self.scope != "compile":
            self._check_data_rebound(outer)
            self._check_stateful_forward()
            self._check_checkpoint_rng()
        if self.scope != "compile" and not self.scope.startswith("full_iteration"):
            self._check_attributes_set_in_forward(outer)
        if self.scope == "compile":
            self._check_requires_grad_under_compile(outer)
        if self.scope.startswith("full_iteration"):
            self._check_requires_grad(loop)
            self._check_optimizer_kept(outer)
            scope = self._enclosing_scope(parents, loop) or wrapper.module
            if self.spec.through_calls:
                before, new_loop = self._called_step(loop, outer, scope)
            else:
                before, new_loop = self._full_iteration(loop, outer, scope, positions)
        else:
            before, new_loop = self._module_scope(loop)
        transformer = _Splice(loop, new_loop, outer, before, self.declared, self.function_rewrite)
        module = wrapper.module.visit(transformer)
        if not transformer.inserted:
            raise self.refuse("could not place the setup code before the loop")
        if self.scope.startswith("full_iteration") and not (self.optimizer_outside or self.per_micro_step):
            module = self._capturable_optimizer(module)   # only an optimizer that steps inside the graph
        if self.scope != "compile":
            # autocast must not cache casts inside a captured region, wherever it is built: in the
            # loop, or before it (nanoGPT's `ctx = torch.amp.autocast(...)`, then `with ctx:`);
            # make_graphed_callables refuses one that caches
            module = _autocast_without_cache(module)
        if self.scope not in HELPERS:   # compile
            module = _with_import(module, "import torch\n", _imports_torch)
            return _with_first_import(module, BUILTINS_IMPORT) if self.builtins_routed else module
        extra = ""
        if self.ddp is not None and self.scope in DDP_GRAPH_SCOPES:
            module = built_on_side_stream(module)
            extra = SIDE_STREAM + (IF_DDP if self.scope == ALLREDUCE_OUTSIDE else UNWRAPPED)
        return _add_helper(module, self.scope, extra, rebound_builtins(self.module.code), self.builtins_routed)

    def _check_ddp(self, loop) -> None:
        """The DDP wrapper of the loop's model, if any, and what its capture cannot do."""
        models = self._model_names()
        if sharded(self.module) and self.scope not in ("compile", "forward"):
            raise self.refuse("the script shards its model with FSDP, whose all-gathers and reduce-scatters run "
                              "from Python hooks that a replayed graph skips; cg-advise does not capture FSDP loops")
        self.ddps = find_ddps(self.module, models, loop)
        self.ddp = self.ddps[-1] if self.ddps else None
        if self.ddp is None:
            if self.scope not in ("compile", "forward") and calls_ddp(self.module):
                raise self.refuse("the script builds a DistributedDataParallel that cg-advise cannot trace to the "
                                  "loop's model (built in a helper?); graphing it as a plain module would skip its "
                                  "all-reduce: assign `model = DistributedDataParallel(...)` where the loop can see it")
            if self.scope == ALLREDUCE_OUTSIDE:
                raise self.refuse("no model of the loop is wrapped in DistributedDataParallel (this scope is "
                                  "full_iteration with DDP's all-reduce outside the graph)")
            return
        if self.scope in ("compile", "forward"):   # compile is torch's own; forward is for inference loops
            return
        for ddp in self.ddps:
            if ddp.find_unused:
                raise self.refuse(f"{ddp.name} is built with find_unused_parameters=True: DDP searches the "
                                  "autograd graph for unused parameters on the host at every forward, which a "
                                  "replayed graph skips; it cannot be captured")
        self.maybe_ddps, untraced = untraced_ddps(self.module, models, self.ddps)
        unused = next((call for call in untraced if finds_unused(call)), None)
        if self.maybe_ddps and unused is not None:
            raise self.refuse(f"line {self.positions[unused].start.line}: a DistributedDataParallel built with "
                              "find_unused_parameters=True may be "
                              f"{' or '.join(self.maybe_ddps)} (cg-advise cannot trace it to a name); DDP searches "
                              "the autograd graph on the host at every forward, which a replayed graph skips")
        if self.scope in DDP_FAILED_ON_GPU:
            raise self.refuse(f"{self.ddp.name} is DistributedDataParallel: {DDP_FAILED_ON_GPU[self.scope]} on two "
                              "H200 GPUs (torch 2.11), so it is not offered under DDP")
        for ddp in self.ddps:
            if ddp.no_sync and self.scope.startswith("full_iteration"):
                raise self.refuse(f"the loop skips the all-reduce with {ddp.name}.no_sync() on some iterations; a "
                                  "captured iteration does the same on every replay (use fwd_bwd: DDP all-reduces "
                                  "eagerly after the graphed backward)")
        if self.scope == ALLREDUCE_OUTSIDE and self.maybe_ddps:
            raise self.refuse(f"{' and '.join(self.maybe_ddps)} may be DistributedDataParallel too (the script builds "
                              "a DDP that cg-advise cannot trace to a name: in a helper?): the step is captured under "
                              f"{self.ddp.name}.no_sync() only, and another DDP's all-reduce would be captured in the "
                              "graph (use fwd_bwd: DDP all-reduces each eagerly after the graphed backward)")
        if self.scope == ALLREDUCE_OUTSIDE and len(self.ddps) > 1:
            raise self.refuse(f"{' and '.join(d.name for d in self.ddps)} are each DistributedDataParallel: the step "
                              "is captured under one model's no_sync() and only its gradients are all-reduced after "
                              "the replay (use fwd_bwd: DDP all-reduces each eagerly after the graphed backward)")
        # every DDP construction in the file is built under a side stream (built_on_side_stream),
        # as `lambda: DDP(...)`: one that a lambda would evaluate otherwise cannot be
        for call in ddp_calls(self.module):
            why = not_deferrable(call, self.parents)
            if why:
                raise self.refuse(f"line {self.positions[call].start.line}: DistributedDataParallel must be built "
                                  f"under a side stream for a captured backward, as `lambda: DDP(...)`, but {why}")

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
    def _check_sparse(self, loop) -> None:
        """A graph scope whose graphs would hold sparse tensor operations (``sparse_use``):
        refused, pointing at compile, which runs them eagerly; compile applies, and says what
        it leaves to eager, those or an RNN module (its CUDA graphs skip that code: a GCN's
        compile measured 0.98x on the H100)."""
        whole_step = self.scope.startswith("full_iteration")
        models = None if whole_step else set(self.spec.models or [self.spec.model])
        found = sparse_use(self.module, list(loop.body.body), self.functions, models)
        if self.scope == "compile":
            found = found or rnn_module(self.module)
            self.compile_eager = found[1] if found else ""
        elif found:
            node, what = found
            raise self.refuse(f"line {self.positions[node].start.line}: {what} makes the step use sparse tensors, "
                              "whose kernels size their outputs from the data; a CUDA graph cannot capture them "
                              "(try --scope compile)")

    def _whole_step_scope(self) -> str:
        """The scope a refusal points a loop to whose model's calls no graphed forward can take:
        one graph of the whole step, with DDP's all-reduce outside it under DDP (whose capture
        inside hung), or compile for an inference loop, which has no step to capture."""
        if self.spec.kind == "inference":
            return "compile"
        return ALLREDUCE_OUTSIDE if self.ddp is not None else "full_iteration"

    def _check_double_backward(self, loop) -> None:
        """A step that differentiates a backward again (``double_backward``): refused for the
        scopes that graph a model's calls with a backward of their own (compile, fwd_bwd,
        submodule); a graph of the whole step captures the second backward's kernels as well."""
        found = double_backward(list(loop.body.body), self.functions, self.module)
        if found is not None:
            raise self.refuse(f"line {self.positions[found].start.line}: the step differentiates a backward again "
                              "(create_graph=True); the backward of a graphed or compiled model cannot be "
                              f"differentiated (try --scope {self._whole_step_scope()})")

    def _check_requires_grad(self, loop) -> None:
        """A step that freezes or unfreezes parameters itself (pix2pix's discriminator, frozen
        for the generator's update and unfrozen at the top of the next iteration): refused for
        a whole-step graph, whose warm-up runs the step again from the flags it left; fwd_bwd
        graphs each model's forward and backward and takes the flags as each call finds them.
        Flags changed between epochs (a backbone unfrozen) are the helper's to follow."""
        models = set(self.spec.models or [self.spec.model])
        found = requires_grad_change(list(loop.body.body), self.functions, models)
        if found is not None:
            raise self.refuse(f"line {self.positions[found].start.line}: the iteration changes which parameters "
                              "require grad; a graph of the whole step holds one set (try --scope fwd_bwd)")

    def _check_stateful_forward(self) -> None:
        """A module of the script's whose forward draws on the host or counts in Python on
        itself (``stateful_forward``): a graph holds what the capture's call did (the sweep of
        2026-11-30: a random flip flipped every batch or none; a temperature annealed in
        forward stopped at its fourth value). Under fwd_bwd only where the model holds it."""
        found = stateful_forward(self.module)
        models = set(self._model_names())
        if found is not None and (self.scope.startswith("full_iteration") or made_inside_models(
                self.module, found[0], models)):
            name, node, what = found
            why = ("a capture cannot copy from the host's pageable memory (make it on the GPU: torch.zeros(..., "
                   "device=...))" if what.startswith("copies") else "a graph would repeat its capture's call at every "
                   "replay (draw on the GPU with device=..., keep counters in tensors changed in place)")
            raise self.refuse(f"line {self.positions[node].start.line}: {name}.forward {what} "
                              f"({code_of(node).strip()}); {why}")

    def _check_checkpoint_rng(self) -> None:
        """``torch.utils.checkpoint`` keeping the RNG state (its default) reads and sets the CUDA
        generator's state, which torch before 2.11 refuses during a capture ("Cannot call
        CUDAGeneratorImpl::current_seed during CUDA graph capture", pytorch/pytorch#83148,
        #162504): the rewrite would fail at its first step there. Checkpointed blocks captured
        on torch 2.11 recompute the mask their forward drew (bench/checkpoint_dropout_probe.py)."""
        found = rng_checkpoints(self.module)
        version = installed_torch_version()
        if found and version is not None and version < (2, 11):
            raise self.refuse(f"line {self.positions[found[0]].start.line}: torch.utils.checkpoint keeps the RNG "
                              f"state, which torch {'.'.join(map(str, version))} cannot read during a CUDA graph "
                              "capture (2.11 can); pass preserve_rng_state=False where the block draws no random "
                              "numbers, or upgrade torch")

    def _check_attributes_set_in_forward(self, outer) -> None:
        """The loop reads from a model what a forward sets on its module (``loss = ... +
        autoencoder.encoder.kl``): a graphed forward runs no Python, so the attribute stays the
        capture's tensor, whose backward was freed at the first replay's (the sweep of
        2026-11-30 failed there). A graph of the whole step runs the forward inside it."""
        attributes = forward_attributes(self.module)
        roots = {m.split(".")[0] for m in self._model_names()}
        found = sorted(p for p in keyed_paths_read(outer) if "." in p and p.split(".")[0] in roots
                       and p.rsplit(".", 1)[1] in attributes)
        if found:
            raise self.refuse(f"the loop reads {found[0]}, which a forward sets on its module (line "
                              f"{self.positions[attributes[found[0].rsplit('.', 1)[1]]].start.line}); a graphed forward "
                              "leaves the capture's tensor there (return it from forward, or try --scope "
                              f"{self._whole_step_scope()})")

    def _check_data_rebound(self, outer) -> None:
        """A tensor's ``.data`` bound anew in the loop (NormFace's ``model.weight.data =
        F.normalize(...)`` after each step): the parameter moves to new memory, while a graph
        keeps reading and stepping the old (the sweep of 2026-11-30 printed weights that had
        stopped changing). Changed in place (``.data.copy_(...)``), it stays where the graph reads."""
        hooked = [c for c in calls_in(outer, lambda c: dotted(c.func).split(".")[-2:-1] == ["prune"] or (
            isinstance(c.func, cst.Attribute) and c.func.attr.value.startswith("register_") and "hook" in c.func.attr.value))]
        if hooked:   # the pruning tutorial's prune.l1_unstructured between epochs: a hook the capture never ran
            raise self.refuse(f"line {self.positions[hooked[0]].start.line}: the loop adds a hook to a module "
                              f"({code_of(hooked[0].func)}) or prunes it while it trains; a graph "
                              "keeps what its capture ran (add it before the loop)")
        found = [node for node in nodes(outer, (cst.Assign,))
                 if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "data" for t in node.targets)]
        if found:
            raise self.refuse(f"line {self.positions[found[0]].start.line}: the loop gives a tensor new memory "
                              f"({code_of(found[0].targets[0].target)} = ...), while a graph keeps "
                              "reading the old (change it in place: with torch.no_grad(): w.copy_(...))")

    def _check_optimizer_kept(self, outer) -> None:
        """An optimizer built again, or its state cleared, inside the loops around the step (a
        continual-learning loop's fresh Adam per task, ``optimizer.state.clear()``): the helper,
        made before them, restores and captures the first one's state, so the warm-up's steps
        stay in the new one and the graph keeps stepping the old tensors (the sweep of
        2026-11-30: Adam ended at step 27 where eager's is at 24). fwd_bwd keeps the optimizer
        eager."""
        optimizers = set(self._optimizers())
        states = {f"{o}.state" for o in optimizers}
        found = [node for node in nodes(outer, (cst.Assign, cst.AugAssign, cst.Call))
                 if ((is_method(node, None, "clear") and dotted(node.func.value) in states)
                     or (is_method(node, None, "load_state_dict") and dotted(node.func.value) in optimizers)
                     if isinstance(node, cst.Call) else names_assigned(node, paths=True) & (optimizers | states))]
        if found:
            raise self.refuse(f"line {self.positions[found[0]].start.line}: the loop builds its optimizer again, "
                              "clears its state or loads another; a graph holds the first one's state tensors (build "
                              "it once before the loop and reset it in place, or try --scope fwd_bwd)")

    def _check_requires_grad_under_compile(self, outer) -> None:
        """Parameters frozen or unfrozen anywhere the compiled model runs (a backbone unfrozen
        after the first epoch, a discriminator frozen for the generator's update): refused for
        compile. Dynamo does not guard on a parameter's ``requires_grad``
        (pytorch/pytorch#139476) and replays the graph traced with the flags of the first call:
        on the H100 (torch 2.11) the compiled fine-tuning loop trained its head alone and ended
        at loss 2.118 where eager ends at 0.229; the graph scopes capture again on such a change."""
        models = set(self.spec.models or [self.spec.model])
        region = [outer]
        function = self._enclosing_scope(self.parents, outer)
        if function is not None:   # the loops that call the function holding it (an epoch loop in main())
            name = function.name.value
            region += [n for n in nodes(self.module, (cst.For, cst.While))
                       if calls_in(n.body, lambda c: dotted(c.func) in (name, f"self.{name}"))]
        found = next((f for f in (requires_grad_change([r], self.functions, models) for r in region)
                      if f is not None), None)
        if found is not None:
            raise self.refuse(f"line {self.positions[found].start.line}: the loop changes which parameters require "
                              "grad after the model is compiled; torch.compile keeps the graph of the flags it first "
                              "saw and would not train the parameters unfrozen later (pytorch/pytorch#139476; try "
                              "--scope fwd_bwd)")

    def _models(self, loop) -> list:
        """The models this scope applies to: every module the iteration calls with grad (data
        flow, not the optimizer's constructor). A graphed forward and backward keeps one call's
        activations, so a module called twice per iteration is left eager (and one called with
        keyword arguments, for the inference helper); compile takes them all."""
        spec, models = self.spec, self._model_names()
        if not models:
            raise self.refuse("no model found: no module is called with grad in the loop, and the optimizer is "
                              "not built from <model>.parameters()")
        # the loop's own calls of each model (not those of a function it calls, nor of another method)
        direct = {m: calls_in(loop.body, lambda c, m=m: dotted(c.func) == m) for m in models}
        if self.scope == "compile":
            called = [m for m in models if direct[m]]
            if not called:
                raise self.refuse(f"{models[0]} is not called in the loop itself (a function the loop calls runs "
                                  "it); compile replaces the loop's calls of the model")
            return called
        usable, why = [], []
        for model in models:
            # a graphed forward takes CUDA tensors only: fwd_bwd's and forward's helpers run any other call eagerly
            given = (host_value_argument(list(loop.body.body), {model}, self.module,
                                         self._enclosing_scope(self.parents, loop))
                     if self.scope in ("fwd_bwd", "forward") else None)
            bare = (self._class_without_forward(model) if self.scope in ("fwd_bwd", "forward") and not direct[model]
                    else None)
            if bare:
                # the loop calls another method of it (CleanRL's agent.get_action_and_value): a graphed
                # forward would never run, and the rewrite would change nothing
                why.append(f"{model}'s class, {bare}, defines no forward: the loop calls its other methods, which "
                           "a graphed forward does not replace (try --scope full_iteration or submodule)")
            elif self.scope == "forward" and any(a.keyword or a.star for c in direct[model] for a in c.args):
                # the inference helper's buckets cut positional batches (fwd_bwd's helper takes keywords)
                why.append(f"{model} is called with keyword or ** arguments; a graphed inference forward takes "
                           "positional tensors (try --scope compile)")
            elif given:
                why.append(f"{model} is given a Python value ({given[1]}); a graphed forward takes CUDA tensors only "
                           "and would run every such call eagerly (pass it as a tensor, or try --scope compile)")
            elif self.scope in ("fwd_bwd", "forward") and (made := self._returns_distribution(model)):
                why.append(f"{model}'s forward returns a torch.distributions object ({made}), which a graphed "
                           "forward cannot hand back: every call would run eagerly (return its parameters and "
                           f"build the distribution outside, or try --scope {self._whole_step_scope()})")
            elif spec.calls.get(model, 1) > 1 and (spec.through_calls or calls_on_one_path(loop.body.body, model) > 1):
                why.append(f"{model} is called more than once per iteration; a graphed forward keeps the "
                           f"activations of one call for its backward (try --scope {self._whole_step_scope()})")
            else:
                usable.append(model)
        if not usable:
            raise self.refuse(why[0])
        return usable

    def _class_without_forward(self, model: str) -> Optional[str]:
        """The class ``model`` is built from (its only binding in the file, a call of a class the
        script defines at its top level) where nothing binds ``forward`` on it: not its body at
        any depth (a ``def``, ``forward = predict``, under an ``if``), nor its bases of the file,
        nor an assignment ``Class.forward = ...``, and it derives from nothing else but
        ``nn.Module``; None otherwise (a class from elsewhere may well have one)."""
        built = self._built_from(model)
        if built is None:
            return None
        classes = {c.name.value: c for c in self.module.body if isinstance(c, cst.ClassDef)}
        set_later = {dotted(t.target).split(".")[0] for n in nodes(self.module, cst.Assign) for t in n.targets
                     if dotted(t.target).endswith(".forward")}
        seen, todo = set(), [built]
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            found = classes.get(current)
            if found is None or current in set_later:
                return None
            if any(n.value == "forward" for n in nodes(found.body, cst.Name)):   # a def's name is a Name too
                return None
            for base in found.bases:
                base_name = dotted(base.value)
                if base_name.split(".")[-1] != "Module":
                    todo.append(base_name)
        return built

    def _built_from(self, model: str) -> Optional[str]:
        """The name of the class ``model`` is built from, where its only binding in the file is a
        call of it (``Agent(...).to(device)`` too); None otherwise."""
        built = [n.value for n in nodes(self.module, cst.Assign)
                 if any(dotted(t.target) == model for t in n.targets)]
        if len(built) != 1 or not isinstance(built[0], cst.Call):
            return None
        value = built[0]
        while isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
            value = value.func.value   # Agent().to(device), Agent().cuda()
        return value.func.value if isinstance(value.func, cst.Name) else None

    def _returns_distribution(self, model: str) -> Optional[str]:
        """``"Normal, line 12"`` where the forward of the class ``model`` is built from (a class
        of the script's top level) returns a torch.distributions object, alone or in a tuple,
        list or dict, made in the return or bound to a name first; None otherwise. fwd_bwd's
        helper hands back a forward's tensors only: PPO's actor-critic returning ``Normal(mu,
        std), value`` ran eagerly on every call on the H200 (the candidate "never replayed a CUDA graph")."""
        built = self._built_from(model)
        found = next((c for c in self.module.body if isinstance(c, cst.ClassDef) and c.name.value == built), None)
        forward = next((f for f in (found.body.body if found is not None else ())
                        if isinstance(f, cst.FunctionDef) and f.name.value == "forward"), None)
        if forward is None or not uses_distributions(self.module):
            return None
        names = distribution_names(self.module)

        def distribution(expr) -> Optional[str]:
            return distribution_class(expr, names) if isinstance(expr, cst.Call) else None

        nested = nodes(forward.body, (cst.FunctionDef, cst.Lambda))
        bound = {}   # name -> what each of its assignments makes (a distribution's class, else None)
        for n in nodes(forward.body, cst.Assign, skip=nested):
            for t in n.targets:
                for name in plain_target_names(t.target):
                    bound.setdefault(name, []).append(distribution(n.value))
        made = {name: values[0] for name, values in bound.items() if all(values)}   # a distribution whatever the path
        for ret in nodes(forward.body, cst.Return, skip=nested):
            values = [ret.value] if ret.value is not None else []
            if isinstance(ret.value, (cst.Tuple, cst.List)):
                values = [e.value for e in ret.value.elements]
            elif isinstance(ret.value, cst.Dict):
                values = [e.value for e in ret.value.elements]
            for value in values:
                name = distribution(value) or (made.get(value.value) if isinstance(value, cst.Name) else None)
                if name:
                    return f"{name}, line {self.positions[ret].start.line}"
        return None

    def _module_scope(self, loop) -> tuple:
        """(setup before the loop, the loop) for compile, forward, fwd_bwd and submodule."""
        models = self.models = self._models(loop)
        # gradient accumulation (a step only every k iterations, micro-steps in a loop inside the
        # iteration, several backward passes): the graphed backward's gradients live in static buffers that the
        # next replay overwrites, so .grad must get a copy (found as a mismatch on the GPU); so
        # must gradients zeroed in place (set_to_none=False): .grad would be that very buffer,
        # and the next backward would add it to itself (doubled gradients, found on the GPU)
        zeroed_in_place = calls_in(loop.body, lambda c: is_method(c, None, "zero_grad")
                                   and any(dotted(a.value) == "False" for a in c.args))
        body, is_step = list(loop.body.body), self._step_flags(loop)
        accumulates = bool(zeroed_in_place) or (self._step_is_conditional(body, is_step)
                                                and not self._each_backward_stepped(body))
        if self.spec.through_calls and self.spec.kind != "inference":
            # backward or step inside a call of the script's code (timm's loss_scaler): how the
            # gradients are zeroed, accumulated or taken twice there is not read, so the graphed
            # backward's gradients are copied out whatever it does, and compile (whose CUDA graphs
            # have no such copy) is refused
            if self.scope == "compile":
                raise self.refuse(f"line {self.spec.step_call or self.spec.line}: the backward or the optimizer step "
                                  "runs inside a call of the script's own code, where compile's CUDA graphs could "
                                  "overwrite gradients it accumulates; use fwd_bwd, which copies them")
            accumulates = True
        if self.scope == "compile":
            # the loop calls a compiled alias; the model itself is not rebound, so code after the
            # loop (a checkpoint's state_dict) sees the module as it was, and a model that is a
            # global or a function's parameter needs no new local binding
            aliases = {m: _compiled_name(m) for m in models}
            code = "".join(f'{aliases[m]} = torch.compile({m}, mode="reduce-overhead")  # {COMPILE_MARK}\n'
                           for m in models)
            if accumulates and self.ddp is not None and self.spec.kind != "inference":
                # the copy beside DDP's reducer hooks, under no_sync, not run on several GPUs yet
                raise self.refuse("gradients accumulate across backward calls of a DistributedDataParallel model; "
                                  "compile's CUDA graphs overwrite them on the next run (try --scope fwd_bwd)")
            if accumulates and self.spec.kind != "inference":
                # compile's CUDA graphs hand the backward's gradients out of memory their next run
                # overwrites, and .grad would be that memory: backward failed on the GPU with
                # "accessing tensor output of CUDAGraphs that has been overwritten". A hook on each
                # parameter copies its gradient out first, as fwd_bwd's helper does
                code += "".join(f"for _cg_p in ({m}.parameters() if isinstance({m}, torch.nn.Module) else ()):  "
                                "# cg-advise: gradients add up over backward calls: each is copied out of "
                                "compile's CUDA graph memory\n"
                                "    if _cg_p.requires_grad:\n        _cg_p.register_hook(torch.clone)\n"
                                for m in models)
            return self._emitted(code, {"isinstance"}), _marks_each_step(_call_through(loop, aliases))
        # several backward passes per step (micro-steps, a GAN's two losses) add into .grad as well
        accumulate = ", accumulate=True" if accumulates or backward_passes(loop) > 1 else ""
        # an output kept past the next call (`losses.append(outputs.loss.detach())`) is a copy: a
        # replay hands back its graph's output buffers, which the next one overwrites
        if self.scope in ("fwd_bwd", "submodule") and keeps_output(list(loop.body.body),
                                                                   model_outputs(loop.body, set(models), self.functions)):
            accumulate += ", clone_outputs=True"
        if self.scope == "forward":
            code = "".join(f"_cg_graph_inference({m})  # cg-advise: forward passes as CUDA graphs, one per "
                           "batch-size bucket\n" for m in models)
        elif self.scope == "fwd_bwd":
            code = "".join(f"_cg_graph_forward({self._wrapped(m)}{accumulate})  # cg-advise: forward and backward as "
                           f"CUDA graphs{self._eager_allreduce(m)}\n" for m in models)
        else:
            code = "".join(f"for _cg_child in _cg_children({self._wrapped(m)}):  # cg-advise: each top-level submodule as "
                           f"CUDA graphs{self._eager_allreduce(m)}\n"
                           f"    if any(p.requires_grad for p in _cg_child.parameters()):\n"
                           f"        _cg_graph_forward(_cg_child{accumulate})\n" for m in models)
        return self._emitted(code, {"any"}), loop

    def _emitted(self, code: str, reads: set) -> list:
        """The statements of ``code`` emitted beside the loop, each of the builtins its own text
        ``reads`` (not a user's name spliced into it: a model called ``input``) read through
        ``_cg_builtins`` where the script binds that name in any scope (``tuner.hygiene``)."""
        rebound = rebound_builtins(self.module.code, everywhere=True) & frozenset(reads)
        routed, changed = route_builtins(cst.parse_module(code), rebound)
        self.builtins_routed |= changed
        return list(routed.body)

    def _wrapped(self, model: str) -> str:
        """The module to graph for ``model``: under DDP, the module it wraps (graphing the
        wrapper would skip DDP's Python, which arms the all-reduce hooks). Found when the setup
        runs (``_cg_unwrapped``), never ``model.module`` as written: a model wrapped on one
        branch only (``model = net`` without a process group) has no ``.module``, and one a
        helper wrapped (``netD = wrap(netD)``) is DDP where nothing here binds it to one."""
        return f"_cg_unwrapped({model})" if self._maybe_ddp(model) else model

    def _eager_allreduce(self, model: str) -> str:
        return (" (under DDP, the module it wraps: DDP all-reduces eagerly after the graphed backward)"
                if self._maybe_ddp(model) else "")

    def _maybe_ddp(self, model: str) -> bool:
        """Whether ``model`` is, or may be, DistributedDataParallel when the setup runs."""
        return any(ddp.name == model for ddp in self.ddps) or model in self.maybe_ddps

    def _step_flags(self, loop) -> list:
        """For each top-level statement of the loop body: does it step an optimizer, or hold the
        hand-written update (``for p in model.parameters(): p.data.add_(...)``)?"""
        manual, through = self.spec.manual_update, self.spec.step_call

        def updates(statement) -> bool:
            # the hand-written update, or the call of the script's code that steps (timm's loss_scaler)
            where = self.positions[statement]
            return any(line and where.start.line <= line <= where.end.line for line in (manual, through))

        return [self._steps_in(s) or updates(s) for s in loop.body.body]

    def _steps_in(self, node) -> bool:
        """Whether ``node`` calls ``step()`` of one of the loop's optimizers or of its GradScaler."""
        steppers = {*self._optimizers(), *([self.spec.scaler] if self.spec.scaler else [])}
        return bool(calls_in(node, lambda c: any(is_method(c, r, "step") for r in steppers)))

    def _each_backward_stepped(self, body) -> bool:
        """Whether every backward of the body is followed by its own optimizer step, where the
        steps are conditional: torchvision's ``if scaler is not None: scaler.scale(loss).backward()
        ... scaler.step(optimizer) else: loss.backward() ... optimizer.step()``, a fine-tuning
        loop's ``with torch.set_grad_enabled(phase == 'train'): ... if phase == 'train':
        loss.backward(); optimizer.step()``. No gradient lives on to the next backward there, so
        none accumulates. Read block by block: one backward, not in a loop, then a step at the
        block's top level; or backward and step both in one ``if`` or ``with`` read likewise."""
        if self.spec.manual_update or self.spec.step_call:
            return False

        def looped(node) -> bool:
            return any(calls_backward(n.body) for n in nodes(node, (cst.For, cst.While)))

        def block(statements) -> bool:
            backwards = [i for i, s in enumerate(statements) if calls_backward(s)]
            stepping = [i for i, s in enumerate(statements) if self._steps_in(s)]
            if not backwards and not stepping:
                return True
            if len(backwards) != 1 or not stepping or looped(statements[backwards[0]]):
                return False
            if backwards == stepping[:1]:   # both under one if or with
                return compound(statements[backwards[0]])
            return backwards[0] < stepping[0] and isinstance(statements[stepping[0]], cst.SimpleStatementLine)

        def compound(node) -> bool:
            if isinstance(node, cst.With):
                # grad mode and autocast only: another context may skip the step it holds
                # (accelerate's `with accelerator.accumulate(model):` steps every k batches)
                return all(_sets_grad_mode(item.item) for item in node.items) and block(node.body.body)
            branches = []
            while isinstance(node, cst.If):
                branches.append(node.body.body)
                node = node.orelse
            if isinstance(node, cst.Else):
                branches.append(node.body.body)
            return bool(branches) and all(map(block, branches))

        return block(list(body))

    def _optimizers(self) -> list:
        return self.spec.optimizers or [o for o in [self.spec.optimizer] if o]

    def _model_names(self) -> list:
        """The models discovery found, as the loop names them (none where it found none)."""
        return [m for m in self.spec.models or [self.spec.model] if m]

    def _step_is_conditional(self, body, is_step) -> bool:
        """No optimizer step at the body's top level, or one inside an if/for/with (the loop of
        a hand-written update, or a `with torch.no_grad():` around it, runs every iteration)."""
        def unconditional(statement) -> bool:
            if isinstance(statement, cst.SimpleStatementLine):
                return True
            return bool(self.spec.manual_update) and isinstance(statement, (cst.For, cst.With)) and not calls_in(
                statement, lambda c: is_method(c, None, "step"))

        return not any(is_step) or not all(unconditional(body[i]) for i, s in enumerate(is_step) if s)

    # -- full_iteration: the step's statements become a captured function -----------------
    def _full_iteration(self, loop, outer, scope, positions):
        spec = self.spec
        body = list(loop.body.body)
        # a GradScaler checks for infs on the host and a scheduler (or `group["lr"] = lr`) changes a Python-float LR:
        # then forward, loss and backward are captured and the optimizer step stays eager
        # so does an optimizer that cannot step inside a graph (LBFGS, SparseAdam, a third-party
        # class we do not know): capturing its step failed as "optimizer-not-capturable"
        self.optimizer_outside = (bool(spec.scaler or spec.scheduler or spec.lr_set) or self.scope == ALLREDUCE_OUTSIDE
                                  or not self._optimizer_steps_in_graphs())
        optimizers = self._optimizers()
        is_step = self._step_flags(loop)
        if self._step_is_conditional(body, is_step):
            # the optimizer whose step sits under the condition (a WGAN's generator, every fifth step)
            held = [body[i] for i, s in enumerate(is_step) if s and not isinstance(body[i], cst.SimpleStatementLine)]
            stepped = [o for o in optimizers if held and calls_in(held[0], lambda c, o=o: is_method(c, o, "step"))]
            what = (f"{stepped[0]}.step()" if stepped else f"{spec.optimizer}.step()" if spec.optimizer
                    else f"the update at line {spec.manual_update}")
            raise self.refuse(f"{what} runs conditionally (gradient accumulation, or a step every few iterations?); "
                              "a captured iteration needs one step per loop iteration")
        end = len(is_step) - 1 - is_step[::-1].index(True)   # the last optimizer step: a GAN steps two
        first_step = is_step.index(True)
        backwards = [i for i in range(first_step) if calls_backward(body[i])]
        skips = [s for s in body[backwards[-1] + 1:first_step] if leaves_iteration(s)] if backwards else []
        if skips:
            # a step skipped on a value of this one (a non-finite gradient norm): the graph ends
            # at the backward, and the check and the optimizer step run eagerly after each replay.
            # Only where the skip throws the gradients away: a `continue` that keeps them is
            # gradient accumulation, which a graph that writes them afresh would lose
            kept = next((s for s in skips if not calls_in(s, lambda c: is_method(c, None, "zero_grad"))), None)
            if kept is not None:
                raise self.refuse(f"line {self.positions[leaves_iteration(kept)].start.line}: the iteration skips the "
                                  "optimizer step and keeps its gradients (gradient accumulation?); a captured "
                                  "backward writes them afresh at every replay (use fwd_bwd)")
            self.optimizer_outside = True
        if self.optimizer_outside:
            if len(optimizers) > 1:
                raise self.refuse(f"the optimizers {', '.join(optimizers)} step eagerly (a GradScaler, a scheduler "
                                  "or an optimizer that cannot be captured) between backward passes; one graph "
                                  "cannot hold the work around them")
            end = is_step.index(True)
            is_backward = [calls_backward(s) for s in body[:end]]
            if True not in is_backward:
                raise self.refuse("no backward() before the optimizer step at the loop's top level")
            end = len(is_backward) - 1 - is_backward[::-1].index(True)
            if isinstance(body[end], (cst.For, cst.While)):
                return self._micro_steps(loop, body, end, outer, scope, positions)
        return self._capture(loop, body, end, outer, scope, positions)

    def _called_step(self, loop, outer, scope):
        """full_iteration of a step the loop calls as a function of the script (``loss =
        train_step(model, optimizer, x, y)``, PyG's ``loss = train()``): the call captured whole,
        the loop calling the graph in its place with the call's arguments, where one replay does
        what a call does; else the function's own step statements, as a loop body's
        (``_captured_in_function``). Refused, saying why, where neither can (``tuner.step_function``)."""
        spec, positions = self.spec, self.positions
        body = list(loop.body.body)
        at = [s for s in body if positions[s].start.line <= (spec.step_call or 0) <= positions[s].end.line]
        if not at:   # discovery placed no call (a step it found conditional): the one call that runs backward
            at = [s for s in body if step_call(s, self.functions) and calls_backward(
                self.functions.get(dotted(step_call(s, self.functions)[1].func)) or cst.Pass())]
            at = at if len(at) == 1 else []
        # a Trainer's `self.train_step(batch)`: a method of the class whose method holds the loop
        methods = self._own_methods(outer)
        found = step_call(at[0], self.functions) or step_call(at[0], methods) if at else None
        function = (self.functions.get(dotted(found[1].func)) or methods.get(dotted(found[1].func))) if found else None
        if function is None or function not in self.module.body and function not in methods.values():
            raise self.refuse(f"line {spec.step_call or spec.line}: backward() or the optimizer step runs inside a "
                              "call of the script's own code that cg-advise cannot stand a graph for: a method, "
                              "a callable object (a loss scaler's __call__?), a function not defined at the "
                              "module's top level, or one called in a comprehension, a lambda, a conditional "
                              "expression or more than once in its statement (try --scope fwd_bwd)")
        statement, (targets, call), name = at[0], found, function.name.value
        index, line = body.index(statement), positions[statement].start.line
        try:
            if function not in self.module.body:
                if any(dotted(d.decorator) in ("staticmethod", "classmethod") for d in function.decorators):
                    raise NotAStep("it is a static or class method, which takes no self")
                self._check_method_state(outer, function)
            self._check_step_call(outer, scope, body, index, call, function)
        except NotAStep as why:
            raise self.refuse(f"line {line}: the step runs inside {name}(), which no graph can hold: {why} "
                              "(try --scope fwd_bwd)") from None
        try:
            return self._captured_call(loop, outer, scope, index, targets, call, function)
        except NotAStep as why:
            whole = why
        self.spec = spec
        try:
            return self._captured_in_function(loop, outer, scope, call, function)
        except NotAStep as why:
            self.spec = spec
            if why.args[0] != NOT_GLOBAL:
                raise self.refuse(f"line {line}: the step runs inside {name}(), and a graph can capture neither the "
                                  f"call whole ({whole}) nor its step statements: {why} (try --scope fwd_bwd)") from None
        raise self.refuse(f"line {line}: the step runs inside {name}(), which a graph cannot capture whole: {whole} "
                          "(try --scope fwd_bwd)")

    def _check_step_call(self, outer, scope, body, index, call, function) -> None:
        """NotAStep where no graph can stand for the call, whole or in part: the loop runs a
        backward or a step outside it too, or calls the model before it (what it hands the call
        may come from the model, and the graph's copy would cut the backward off from it); the
        function reads a global the script binds again, or one whose attribute or item the loop
        sets (a graph keeps the first value); it changes an argument in place (the graph changes
        its copy); the calling function defines its own function of that name; or the script
        already uses the names the rewrite emits."""
        name = function.name.value
        steppers = {*step_receivers(function), *self._optimizers()}   # not an environment's env.step(action)
        runs_step = lambda c: is_method(c, None, "backward") or any(is_method(c, o, "step") for o in steppers)  # noqa: E731
        if any(c for s in body if s is not body[index] for c in calls_through(s, self.functions) if runs_step(c)):
            raise NotAStep("the loop runs backward() or an optimizer step outside the call too")
        model_roots = {m.split(".")[0] for m in self._model_names()}
        calls_model = lambda c: dotted(c.func).split(".")[0] in model_roots  # noqa: E731
        if any(calls_in(s, calls_model) for s in body[:index]):
            raise NotAStep("the loop calls the model before the call too; the graph's copy of what it hands the "
                           "call would cut the backward off from it")
        free = free_names(function)
        changed = sorted(free & (self._bound_from_loop(outer) | declared_global(self.module) - declared_global(function.body)))
        if changed:
            raise NotAStep(f"it reads the global {changed[0]!r}, which the script binds again while it runs; a graph "
                           "would keep its first value (pass it as an argument)")
        through = sorted(free & set_through(outer))
        if through:
            raise NotAStep(f"it reads the global {through[0]!r}, whose attribute or item the loop sets; a graph would "
                           "keep the first value")
        stored = stores_into_argument(function, self.functions)
        if stored:
            raise NotAStep(f"it changes what it is handed ({stored}): a graph would change its own copy, and only "
                           "while it captures (read it without changing it)")
        held = model_roots | {o.split(".")[0] for o in steppers}
        handed = {root_name(a.value) for a in call.args} - held - {None}
        graded = gradient_of_input([s for s in body if s is not body[index]], handed, self.functions) or next(
            (g for _, f, param, _ in handed_to_functions([body[index]], {n: n for n in handed}, {dotted(call.func): function})
             for g in [gradient_of_input(f.body.body, {param}, self.functions)] if g is not None), None)
        if graded is not None:
            raise NotAStep(f"it takes the gradient of what it is handed ({code_of(graded).strip()}"
                           "); a graph's copy of it has none")
        scaled = next(iter(calls_in(function.body, steps_scaler)), None)
        if scaled is not None:
            raise NotAStep(f"{code_of(scaled.func)}() inside it: a GradScaler or a scheduler "
                           "steps there, which keeps the optimizer step out of a graph")
        if function in self.module.body and sum(name in bound_from(self.module, i, i + 1)
                                                for i in range(len(self.module.body))) > 1:
            raise NotAStep(f"the script defines {name} more than once")
        if isinstance(scope, cst.FunctionDef) and name in names_rebound(scope) | {
                f.name.value for f in nodes(scope.body, cst.FunctionDef)}:
            raise NotAStep(f"the calling function binds a {name} of its own")
        taken = sorted(n for n in names_read(self.module) | names_rebound(self.module) if n.startswith("_cg_"))
        if taken:
            raise NotAStep(f"the script already uses {taken[0]}, a name the rewrite emits (patched already?)")

    def _check_method_state(self, outer, method) -> None:
        """NotAStep where a graph of a method called on the loop's own object (a Trainer's
        ``self.train_step(batch)``) would not do what the call does. What the step runs is the
        method, the methods of the object it calls (``self.compute_loss(...)``) and the
        properties it reads (``self.kl_weight``), followed to the end; it must not set an
        attribute of the object (Python state a graph sets once, at its capture), change one of
        its tensors in place (the warm-up's steps would too), step a GradScaler, or read an
        attribute that the loop, or a method the loop calls, sets while the graph lives (a step
        counter, a loss weight annealed each epoch: the graph would keep its capture's). What
        no reading of this file can follow is refused too: ``self`` reached otherwise than
        through ``self.<name>`` (``getattr(self, ...)``, ``t = self``, handed to a call,
        ``self(x)``, ``super()``), a call of ``self`` that no class of the file defines where
        the class derives from one defined elsewhere, and a subclass of the file in which a
        method the step runs resolves to another."""
        cls = self._loop_class(outer)
        classes = {c.name.value: c for c in nodes(self.module, cst.ClassDef)}
        methods = self._class_methods(cls, classes)
        step = self._reached_through_self(method, methods)
        live = [m for m in self._reached_through_self(outer, methods) if m not in step]
        bodies = [m.body for m in step]
        code = lambda node: code_of(node).strip()  # noqa: E731
        around = [outer] + [m.body for m in live if m is not outer]   # what runs while the graph lives
        init = [m.body for path, m in methods.items() if path == "self.__init__"]   # a callback given self there
        for node in bodies + around + init:
            indirect = next((n for n in nodes(node, (cst.Name, cst.Call)) if self._self_indirectly(n, self.parents)),
                            None)
            if indirect is not None:
                shown = indirect   # the call or the statement it is a part of: `log(self)`, `t = self`
                while isinstance(shown, (cst.Name, cst.Arg, cst.Element, cst.StarredElement, cst.List, cst.Tuple,
                                         cst.Attribute, cst.Subscript, cst.SubscriptElement, cst.Index)) \
                        and self.parents.get(shown) is not None:
                    shown = self.parents[shown]
                raise NotAStep(f"{code(shown)[:60]} reaches self otherwise than through self.<name>, which no check "
                               "can follow")
        attributes = {p for m in methods.values() for p in self._set_paths(m.body)}
        external = [b for b in self._bases(cls, classes) if b not in classes and b not in ("object",)]
        unknown = sorted(dotted(c.func) for b in bodies for c in calls_in(b, lambda c: dotted(c.func).count(".") == 1
                                                                           and dotted(c.func).startswith("self."))
                         if dotted(c.func) not in methods and dotted(c.func) not in attributes)
        if external and unknown:
            raise NotAStep(f"it calls {unknown[0]}(), which {cls.name.value} takes from {external[0]}, a class "
                           "defined elsewhere")
        ran = {f"self.{m.name.value}": m for m in step}
        for other in classes.values():
            if other is not cls and cls.name.value in self._bases(other, classes):
                theirs = self._class_methods(other, classes)
                changed = sorted(path for path, m in ran.items() if theirs.get(path) is not m)
                if changed:
                    raise NotAStep(f"in {other.name.value}, a subclass of {cls.name.value}, {changed[0]}() is "
                                   "another method: the object the loop runs may step otherwise than the method checked")
        if any(calls_in(b, steps_scaler) for b in bodies):
            raise NotAStep("a GradScaler or a scheduler steps inside it, which keeps the optimizer step out of a "
                           "graph")
        kept = sorted(p for b in bodies for p in self._set_paths(b) if p.startswith("self."))
        if kept:
            raise NotAStep(f"it sets {kept[0]}, Python state a graph would set once, at its capture")
        if any(changed_in_place(b.body, {"self"}, self.functions) for b in bodies):
            # a running statistic of the object's (self.ema.mul_(0.9)): the warm-up's steps would
            # change it too, and only the models and optimizers are put back after them
            raise NotAStep("it changes a tensor of self's in place, which the graph's warm-up steps would change "
                           "too (keep it in a global, or in a module)")
        elsewhere = set().union(*map(self._set_paths, around))
        read = set().union(*map(keyed_paths_read, bodies))
        made = sorted(p for c in self._lineage(cls, classes)
                      for a in nodes(c.body, cst.Assign) if self.parents.get(self.parents.get(a)) is c.body
                      and isinstance(a.value, cst.Call) and dotted(a.value.func).split(".")[-1] in PROPERTIES
                      for t in a.targets for p in [f"self.{dotted(t.target)}"] if p in read)
        if made:   # `w = property(_w)`: a method no call of self names
            raise NotAStep(f"it reads {made[0]}, a property made by property(...), which no check follows")
        for node in around:
            # `m = self.model; m.temp = ...`: the object's state set through another name
            aliases = {t for a in nodes(node, cst.Assign) if dotted(a.value).startswith("self.")
                       for target in a.targets for t in plain_target_names(target.target)}
            through = sorted(aliases & set_through(node))
            if through:
                raise NotAStep(f"the loop sets an attribute of {through[0]}, a part of self, which the step may read")
        setters = sorted(dotted(c.func) for c in calls_through(outer, self.functions) if dotted(c.func) in self.functions
                         and set_through(self.functions[dotted(c.func)].body)
                         - set(parameter_names(self.functions[dotted(c.func)])))
        if setters:   # a function of the script that sets `trainer.scale` on the global object
            raise NotAStep(f"the loop calls {setters[0]}(), which sets an attribute of a global, which may be self")
        clash = sorted(p for p in read if p.startswith("self.") and any(
            p == q or p.startswith(q + ".") or p.startswith(q + "[") or q.startswith(p + ".") or q.startswith(p + "[")
            for q in elsewhere))
        if clash:
            raise NotAStep(f"it reads {clash[0]}, which the loop or a method it calls sets; a graph would keep the "
                           "value of its capture")

    @staticmethod
    def _set_paths(node) -> set:
        """The attribute paths and constant-key items ``node`` assigns, tuple targets unpacked."""
        def unpacked(target):
            if isinstance(target, (cst.Tuple, cst.List)):
                return [p for e in target.elements for p in unpacked(e.value)]
            return [keyed_path(target)]
        return {p for a in nodes(node, (cst.Assign, cst.AugAssign, cst.AnnAssign))
                for t in (a.targets if isinstance(a, cst.Assign) else [a]) for p in unpacked(t.target)} - {""}

    @staticmethod
    def _self_indirectly(node, parents) -> bool:
        """Whether ``node`` reaches ``self`` otherwise than as ``self.<name>``: ``self`` alone
        (an argument, ``t = self``, ``self(x)``, ``vars(self)``, ``self.__dict__``), or ``super()``."""
        if isinstance(node, cst.Call):
            return dotted(node.func) == "super"
        if node.value != "self":
            return False
        parent = parents.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return parent.attr.value.startswith("__")
        return not isinstance(parent, cst.Param)

    @staticmethod
    def _bases(cls: cst.ClassDef, classes: dict) -> list:
        """The names of ``cls``'s bases, and theirs where the script defines them (``classes``),
        in the order Python looks a method up in them (left to right, depth first: the MRO of
        the plain hierarchies scripts write)."""
        found = []

        def visit(node) -> None:
            for base in node.bases:
                name = dotted(base.value)
                if name and name not in found:
                    found.append(name)
                    if name in classes:
                        visit(classes[name])
        visit(cls)
        return found

    def _lineage(self, cls: cst.ClassDef, classes: dict) -> list:
        """``cls`` and the script's classes it derives from, in lookup order."""
        return [cls] + [classes[b] for b in self._bases(cls, classes) if b in classes]

    def _class_methods(self, cls: cst.ClassDef, classes: dict) -> dict:
        """``self.<name>`` -> what a call through ``self`` runs in an object of ``cls``: its own
        methods over those of the script's classes it derives from, the first base first."""
        methods = {}
        for base in reversed(self._lineage(cls, classes)):
            methods.update(self_methods(base))
        return methods

    @staticmethod
    def _reached_through_self(node, methods: dict) -> list:
        """``node`` and the methods (``methods``: ``self.<name>`` -> def) it calls through
        ``self`` or reads as properties (``@property``, ``functools.cached_property``), and
        those they reach, to the end."""
        found, frontier = [node], [node]
        while frontier:
            reached = []
            for inner in frontier:
                called = {dotted(c.func) for c in calls_in(inner, lambda c: True)}
                read = paths_read(inner)
                for path, method in methods.items():
                    prop = any(dotted(d.decorator).split(".")[-1] in PROPERTIES for d in method.decorators)
                    if method not in found and (path in called or prop and path in read):
                        found.append(method)
                        reached.append(method)
            frontier = reached
        return found

    def _counted_by(self, outer, skip=()):
        """A test of an expression: is it a plain Python number that changes from one iteration
        of the loops in ``outer`` to the next (``varying_numbers``: the counter, a weight ramped
        from it), which a graph would hold at its first value."""
        numbers = varying_numbers(outer, skip=skip, module=self.module)
        known = set(numbers) | number_constants(self.module)
        return lambda expr: is_number_expression(expr, known, set(numbers)) or host_number_read(expr, known)

    def _bound_from_loop(self, outer) -> set:
        """The globals bound from the module statement that holds ``outer`` on, in it or after
        it: values that may change once a step function has run (set before it, they are the
        setup a graph made at its first call sees)."""
        node = outer
        while self.parents.get(node) is not None and self.parents[node] is not self.module:
            node = self.parents[node]
        return bound_from(self.module, self.module.body.index(node)) if node in self.module.body else set()

    def _captured_call(self, loop, outer, scope, index, targets, call, function):
        """``_called_step``'s call captured whole, or NotAStep."""
        spec, body, name = self.spec, list(loop.body.body), function.name.value
        statement = body[index]
        if spec.scaler or spec.scheduler or spec.lr_set:
            raise NotAStep("a GradScaler or a learning-rate schedule keeps the optimizer step out of the graph, "
                           "and the step runs inside the call")
        method = function not in self.module.body   # `self.train_step(batch)`: self is the first argument
        bound = bind_arguments(function, call.with_changes(args=[cst.Arg(cst.Name("self")), *call.args])
                               if method else call)
        params = set(parameter_names(function))
        made = set().union(*map(names_assigned, function.body.body))
        rebound = names_rebound(outer)

        def outside(inner: str) -> str:
            # what the call site names the function's ``inner`` (an argument, or a global it reads)
            root, _, rest = inner.partition(".")
            if root in bound:
                value = bound[root]
                if not isinstance(value, (cst.Name, cst.Attribute)):
                    raise NotAStep(f"the call passes {root!r} as an expression; name it before the loop")
                code = code_of(value)
                if code.split(".")[0] in rebound:
                    raise NotAStep(f"{code!r}, passed as {root!r}, is bound again inside the loop")
                return f"{code}.{rest}" if rest else code
            if root in params or root in made:
                raise NotAStep(f"{root!r} is the function's own (a default, or bound in it)")
            return inner

        stepped = step_receivers(function)
        models = function_models(function, bound, spec.models or [spec.model], own="self" if method else None)
        if not stepped or not models:
            raise NotAStep("the model's forward runs outside it" if stepped else "its optimizer is not named in it")
        optimizers, outer_models = [outside(o) for o in stepped], [outside(m) for m in models]
        zeroed_before = any(zeroes_grads(s, (*optimizers, *outer_models)) for s in body[:index])
        read_after = returned_host_read(function)
        captured = function
        if read_after is not None and method:
            raise NotAStep(f"it returns {code_of(read_after[0])}, a Python value a replay cannot "
                           "update (return the tensors, and read them in the loop)")
        if read_after is not None:
            # PyG's `return float(loss)`: the graph's function returns the tensors it reads, and
            # the loop reads them after each replay; a copy of the function, so other callers keep it
            value, tensors = read_after
            captured = without_return_read(function, f"_cg_{name}_tensors", tensors)
            caller = names_rebound(scope) | set(parameter_names(scope)) if isinstance(scope, cst.FunctionDef) else set()
            shadowed = sorted(free_names(function) & caller)
            if shadowed:   # the copy is defined beside the loop, where the caller's name would be read
                raise NotAStep(f"it reads the global {shadowed[0]!r}, which the calling function binds too")
        check_body(captured, {*stepped, *models}, self.functions, zeroed_before)
        self._refuse_data_dependent_shape(list(function.body.body), self.positions)
        self._refuse_host_draw(list(function.body.body), self.positions)
        counted = self._counted_by(outer, skip=[statement])
        varying = next((a for a in call.args if counted(a.value)), None)
        if varying is not None:
            raise NotAStep(f"it is passed {code_of(varying.value)}, a Python number that changes "
                           "every iteration, which a graph would hold at its first value (pass a tensor updated in "
                           "place instead)")
        modes = {}
        for mode in mode_calls(function):   # the last call per model sets its flags
            mode_call = mode.body[0].value
            if any(not isinstance(a.value, (cst.Name, cst.Integer)) or a.keyword for a in mode_call.args):
                raise NotAStep("it sets the model's mode from a value")
            args = ", ".join(code_of(a.value) for a in mode_call.args)
            receiver = outside(dotted(mode_call.func.value))
            modes.pop(receiver, None)
            modes[receiver] = f"{receiver}.{mode_call.func.attr.value}({args})\n"
        self.spec = spec = replace(spec, optimizers=optimizers, optimizer=optimizers[0], models=outer_models,
                                   model=outer_models[0])
        if not self._optimizer_steps_in_graphs():
            raise NotAStep("its optimizer cannot step inside a graph")
        self._refuse_argument_checks(list(function.body.body), self.positions)
        inputs = [code_of(a.value) for a in call.args]
        step = f"self.{captured.name.value}" if method else captured.name.value
        setup = [captured] if captured is not function else []
        if any(a.keyword for a in call.args):   # the helper hands its inputs on by position
            arg_names = [f"_cg_arg{i}" for i in range(len(call.args))]
            passed = ", ".join(f"{a.keyword.value}={n}" if a.keyword else n for a, n in zip(call.args, arg_names))
            setup += cst.parse_module(f"def _cg_{name}_positional({', '.join(arg_names)}):\n"
                                      f'    """{name}() as the loop calls it, captured whole by cg-advise (scope '
                                      f'full_iteration)."""\n    return {step}({passed})\n').body
            step = f"_cg_{name}_positional"
        added = isinstance(targets, cst.AugAssign)   # `running += train_step(...)`
        embedded = targets is EMBEDDED   # `losses.append(train_step(...))`
        returned = set(plain_target_names(targets)) if targets is not None and not (added or embedded) else set()
        # what the replay hands back is overwritten by the next: copied out where the loop keeps
        # it (added into a list, `losses += train_step(...)`, keeps its items; added into a number
        # or a tensor, it makes a new value or adds in place); inside a statement, unless read on
        # the host at once (`float(train_step(...))`, `train_step(...).item()`)
        kept = (not self._number_or_tensor(targets.target.value) if added else
                not read_at_once(statement, call) if embedded else
                keeps_reference([outer], returned, skip=[statement]))
        read = ""
        if read_after is not None and embedded:
            raise NotAStep(f"it returns {code_of(read_after[0])}, a Python value a replay cannot "
                           "update, inside a larger statement (bind the call's result to a name first)")
        if read_after is not None:   # the replay hands back the tensors; the loop reads them
            renames = {n: f"_cg_{n}" for n in tensors}
            read = (cst.Module([_renamed_reads(cst.parse_statement(f"{_bound_as(targets)}"
                                                                   f"{code_of(value)}\n"),
                                               renames)]).code if targets is not None else "")
            targets = cst.parse_expression(", ".join(renames.values()))
        else:
            refuse_returned_values(function)
        clone = ", clone_outputs=True" if kept else ""
        tensors_changed = changed_in_place(function.body.body, set(bound) - {
            p for p, value in bound.items() if dotted(value) in {*optimizers, *outer_models}}, self.functions)
        changed = [i for i, a in enumerate(call.args) for name in tensors_changed if a.value is bound[name]]
        if changed:   # `x.mul_(0.5)` on an argument: the replay changes the graph's copy, copied back
            clone += f", changed_inputs={changed}"
        clone += self._state_outside(list(function.body.body), set(bound) | made, outer_models)
        clone += self._watched(list(function.body.body), params | made, None, scope)
        unchecked = NO_ARGUMENT_CHECKS if uses_distributions(self.module) else ""
        setup += cst.parse_module(unchecked + f"_cg_step_graph = _CgFullIterationGraph({step}, [{', '.join(optimizers)}], "
                                  f"[{', '.join(outer_models)}]{clone})\n").body
        comment = f"# cg-advise: replays the captured {name}()"
        if embedded:   # the call's place in its statement taken by the replay
            replay = [*cst.parse_module("".join(modes.values())).body, _with_call_replaced(
                statement, call, cst.parse_expression(f"_cg_step_graph({', '.join(inputs)})"), comment)]
        else:
            target = _bound_as(targets) if targets is not None else ""
            replay = cst.parse_module("".join(modes.values()) + f"{target}_cg_step_graph({', '.join(inputs)})  "
                                      f"{comment}\n" + read).body
        held = {*optimizers, *outer_models}
        self.helper_inputs = sum(1 for code in inputs if code not in held)   # the tensors it copies in
        self.zero_grad_dropped = not zeroed_before   # the function's zero_grad runs in the graph, none on the host
        new_body = body[:index] + [replay[0].with_changes(leading_lines=statement.leading_lines), *replay[1:]] \
            + body[index + 1:]
        return setup, loop.with_changes(body=loop.body.with_changes(body=new_body))

    def _state_outside(self, statements, own: set, models) -> str:
        """``, state=[bank]`` for the globals the step changes in place that are neither its
        own names (``own``: inputs, names it binds) nor the models, optimizers, scaler or
        scheduler whose state the helper restores after its warm-up: without it, the warm-up's
        steps would update a memory bank three more times. '' where there are none."""
        spec = self.spec
        held = {n.split(".")[0] for n in (*self._optimizers(), *models, spec.model, spec.scaler, spec.scheduler) if n}
        own = own | set().union(*(names_rebound(s) for s in statements))   # a `for p in ...` inside it too
        own |= {(a.evaluated_alias or a.evaluated_name).split(".")[0]   # clip_grad_norm_ changes no module
                for i in nodes(self.module, (cst.Import, cst.ImportFrom)) if not isinstance(i.names, cst.ImportStar)
                for a in i.names}
        state = changed_in_place(statements, set().union(*map(names_read, statements)) - own - held - {"self"},
                                 self.functions)
        return f", state=[{', '.join(state)}]" if state else ""

    def _watched(self, statements, own: set, scope, at=None) -> str:
        """``, watched=lambda: (lr,)`` for the globals the step reads, in ``statements`` or in
        the script's functions they call, that the script may bind anew while it replays
        (``rebound_globals``): the helper captures again when one has changed, where the graph
        would read what its capture read (``lr /= 4.0`` between epochs, read by a hand-written
        update inside the step). ``own``: the step's inputs and its own names; names the loop's
        function (``scope``) binds are its locals, not globals; one that the function the helper
        is made in (``at``) binds is read as ``globals()["name"]``. '' where there are none."""
        free = set().union(*map(names_read, statements)) - own
        if isinstance(scope, cst.FunctionDef):
            free -= local_names(scope)
        for call in (c for statement in statements for c in calls_through(statement, self.functions)):
            function = self.functions.get(dotted(call.func))
            if function is not None:
                free |= free_names(function)
        watched = rebound_globals(self.module, free)
        if isinstance(at, cst.FunctionDef):   # a local of the function the helper is made in hides the global
            hiding = local_names(at)
            watched = [f'globals()["{n}"]' if n in hiding else n for n in watched]
        return f", watched=lambda: ({', '.join(watched)}{',' if len(watched) == 1 else ''})" if watched else ""

    def _number_or_tensor(self, name: str) -> bool:
        """Whether the script binds ``name`` only to numbers and torch calls (``running = 0.0``,
        ``total = torch.zeros(())``), at least once: ``name += value`` then makes a new value or
        adds into a tensor, and keeps no reference to ``value`` (a list's ``+=`` keeps its items)."""
        values = [a.value for a in nodes(self.module, (cst.Assign, cst.AnnAssign)) if a.value is not None
                  and name in {n for t in (a.targets if isinstance(a, cst.Assign) else [a])
                               for n in plain_target_names(t.target)}]
        return bool(values) and all(is_number_expression(v, set()) or (
            isinstance(v, cst.Call) and dotted(v.func).startswith("torch.")) for v in values)

    def _captured_in_function(self, loop, outer, scope, call, function):
        """The step function's own step statements captured, as a loop's would be, where it does
        host work around them (Kipf's pygcn: ``train(epoch)`` evaluates and prints after its
        optimizer step): the function calls the graph in their place and keeps the rest. Its
        optimizers and models must be globals, bound once (the graph, a global the function
        reads, holds them); NOT_GLOBAL where they are not, else NotAStep naming what else stops it."""
        spec = self.spec
        bound = bind_arguments(function, call)
        held = [*step_receivers(function), *function_models(function, bound, spec.models or [spec.model])]
        roots = {n.split(".")[0] for n in held}
        if not held or not roots <= free_names(function):
            raise NotAStep(NOT_GLOBAL)
        if roots & (self._bound_from_loop(outer) | declared_global(self.module)):
            raise NotAStep("its optimizer or model is bound again once it has run (in or after the loop that calls it)")
        counted_by = self._counted_by(outer)
        counted = {p for p, value in bound.items() if counted_by(value)}
        models = [m for m in held if m not in step_receivers(function)]
        self.spec = replace(spec, batch=[], optimizers=step_receivers(function), optimizer=step_receivers(function)[0],
                            models=models, model=models[0] if models else None)
        self.step_params = parameter_names(function)
        try:
            setup, new_function = self._full_iteration(function, function, function, self.positions)
        except PatchRefused as refused:
            raise NotAStep(str(refused).split(": cannot apply full_iteration: ", 1)[-1]) from None
        finally:
            self.step_params = []
        step_def, graph = setup[:-1], setup[-1]
        graph_call = next(c for c in nodes(new_function, cst.Call) if dotted(c.func) == "_cg_step_graph")
        passed = sorted(counted & {dotted(a.value) for a in graph_call.args})
        if passed:
            raise NotAStep(f"its step reads {passed[0]!r}, a Python number the loop changes at every call")
        if self.declared[1]:
            raise NotAStep(f"its step reads {self.declared[1][0]!r} before binding it")
        effect = next((c for c in (state_keeping_call(s, self.functions) for s in step_def) if c is not None), None)
        if effect is not None:
            raise NotAStep(f"its step calls {dotted(effect.func)}(), which keeps Python state: a graph would run it "
                           "once, at capture")
        returned = {n for a in nodes(new_function, cst.Assign) if a.value is graph_call
                    for t in a.targets for n in plain_target_names(t.target)}   # what the replay hands back
        assign, helper = graph.body[0], graph.body[0].value
        if any(isinstance(r.value, cst.Name) and r.value.value in returned for r in nodes(new_function, cst.Return)) \
                and not any(a.keyword and a.keyword.value == "clone_outputs" for a in helper.args):
            # handed to the caller, who may keep it past the next replay
            graph = graph.with_changes(body=[assign.with_changes(value=_with_keyword(helper, "clone_outputs", "True"))])
        at = self.module.body.index(function)
        if roots <= bound_from(self.module, 0, at) and not roots & bound_from(self.module, at + 1):
            # its models and optimizers exist where it is defined: the graph is made right after it
            self.function_rewrite = (function, [new_function, *step_def, graph])
            return [], loop
        if len([c for c in nodes(self.module, cst.Call) if dotted(c.func) == function.name.value]) != 1:
            raise NotAStep("its optimizer or model is made after it, and it is called elsewhere too, where the "
                           "graph made before the calling loop may not exist yet")
        self.function_rewrite = (function, [new_function, *step_def])
        declare = cst.parse_module("global _cg_step_graph\n").body if isinstance(scope, cst.FunctionDef) else []
        return [*declare, graph], loop

    def _micro_steps(self, loop, body, end, outer, scope, positions):
        """Gradient accumulation inside the iteration (nanoGPT: ``for micro_step in range(k)``
        with forward and backward, then one optimizer step): one micro-step is the graph,
        replayed k times, its backward adding into the gradients; the optimizer, the
        scaler and the user's zero_grad stay as they were."""
        micro = body[end]
        inner = list(micro.body.body)
        is_backward = [calls_backward(s) for s in inner]
        if not any(is_backward) or not all(isinstance(s, cst.SimpleStatementLine) for s, b in zip(inner, is_backward) if b):
            raise self.refuse(f"line {positions[micro].start.line}: the loop of micro-steps runs backward() inside "
                              "a block; a captured micro-step needs it at the loop's top level")
        if any(calls_in(s, lambda c: is_method(c, None, "zero_grad")) for s in inner):
            raise self.refuse(f"line {positions[micro].start.line}: the loop of micro-steps zeroes gradients; "
                              "a captured micro-step adds into them")
        inner_end = len(is_backward) - 1 - is_backward[::-1].index(True)
        setup, new_micro = self._capture(micro, inner, inner_end, outer, scope, positions, accumulate=True)
        self.per_micro_step = True
        self.prepared_share = 0.0   # the trace's stretch before the first micro-step holds the outer body's work too
        new_body = [new_micro if s is micro else s for s in body]
        return setup, loop.with_changes(body=loop.body.with_changes(body=new_body))

    def _capture(self, loop, body, end, outer, scope, positions, accumulate=False):
        """The statements of ``body`` that make the step ending at ``end`` become a captured
        function; ``loop`` (whose body is ``body``) calls its graph instead."""
        spec = self.spec
        optimizers = self._optimizers()
        is_zero_grad = lambda s: zeroes_grads(s, (*optimizers, *spec.models, spec.model))  # noqa: E731
        functions = self.functions
        start = step_start(body, end, is_zero_grad, functions)
        core, moved, hoisted, aliases = [], [], [], []
        window = body[start:end + 1]
        first_backward = next((i for i, s in enumerate(window) if calls_backward(s)), len(window))
        protected = {*optimizers, *spec.models, spec.model, spec.scaler, spec.scheduler} - {None, ""}
        # the batch and whatever the loops bind outside the step reach the graph as copies: the
        # replay never changes them, so a host read of them (images.size(0)) can follow it
        given = set(spec.batch) | names_rebound(outer, skip=window)
        after = self._after_the_replay(window)
        for i, statement in enumerate(window):
            if is_zero_grad(statement):
                if i > first_backward:
                    core.append(statement)  # between two backward passes (a GAN's generator step) it matters
                continue
            if statement is not body[end] and is_bookkeeping(statement, window[i + 1:]):
                moved.append(statement)  # Python-side state would run once, at capture: keep it live
                continue
            if statement is not body[end] and is_prefetch(statement, window[:i], window[i + 1:]):
                moved.append(statement)  # the next batch, fetched on the host: after the replay, as an input
                continue
            if statement is not body[end] and is_loading(statement, window[:i], functions):
                hoisted.append(statement)  # `noise = noise_bank[i]`: before the replay, as an input
                continue
            if statement is not body[end] and id(statement) in after:
                moved.append(statement)  # `if not math.isfinite(loss_value): sys.exit(1)`: after the replay
                continue
            if has_sync(statement) or is_host_method_call(statement, protected):
                # a host read (`train_loss += loss.item()` between backward and step) moves after the
                # replay when nothing later in the step reads what it binds, and what it reads is
                # either made by the step (the replay hands it back), an input, or left alone by it
                # (what reads only host values it binds moves after the replay with it)
                others = [s for s in window if s is not statement and id(s) not in after]
                fed = names_assigned(statement) & set().union(*map(names_read, [s for s in window[i + 1:]
                                                                               if id(s) not in after]))
                made = set().union(*map(names_assigned, others))
                touched = set().union(*map(names_read, others)) - made - given
                sees = sorted(n for n in names_read(statement) if n in touched)
                if statement is body[end] or fed or sees:
                    why = (f"it binds {', '.join(sorted(fed))}, which the step reads" if fed else
                           f"it reads {', '.join(sorted(sees))}, which the step changes" if sees else "it is the step")
                    raise self.refuse(f"a host sync (.item(), .cpu(), print, ...) inside the step cannot wait for "
                                      f"the replay: {why}; read values after the step")
                # a name the rest of the step binds again (a GAN's `output`) is read through an alias
                # bound here, so that the moved read sees this statement's value, not the last one
                rebound = sorted(names_read(statement) & set().union(*map(names_assigned, window[i + 1:])))
                renames = {name: f"_cg_{name}_{positions[statement].start.line}" for name in rebound}
                if renames:
                    core += cst.parse_module("".join(f"{a} = {n}\n" for n, a in renames.items())).body
                    aliases += renames.values()
                    statement = _renamed_reads(statement, renames)
                moved.append(statement)  # logging, running totals: run after the replay instead
                continue
            core.append(statement)
        # a batch the step picks with the loop's counter (`model(features[step])`) is picked
        # before the replay, as `noise = noise_bank[i]` is, and goes in as an input
        counters = set(varying_numbers(outer, skip=window, module=self.module))
        bound_in_step = set().union(*map(names_assigned, window))
        containers, unmovable = safe_pick_containers(window, counters, scope, optimizers, loop=outer)
        steps = core   # the statements as the source holds them: what every analysis skips as the step
        core, picks, rebuilt = hoist_picks(core, counters, bound_in_step, containers,
                                           reserved_names() | names_read(self.module))
        if picks:
            hoisted += cst.parse_module("".join(f"{name} = {code}\n" for code, name in picks.items())).body
            positions = _Positions(positions, rebuilt)
        self.prepared_share = self._prepared_share(core, body[:start] + hoisted)
        jump = next((j for j in map(leaves_iteration, core + moved) if j is not None), None)
        if jump is not None:
            raise self.refuse(f"line {positions[jump].start.line}: the step may end early "
                              f"({type(jump).__name__.lower()}) on a value it computes; a captured step runs whole "
                              "at every replay (check it after the backward, before the optimizer step, or use "
                              "--scope fwd_bwd)")
        self._refuse_data_dependent_shape(core, positions)
        found = host_data_call(core, functions)
        if found:
            call, what = found
            raise self.refuse(f"line {positions[call].start.line}: {what} reads host data inside the step; a graph "
                              "would run it once, at capture, and replay its first value on every iteration "
                              "(read it before the step and pass it in: fetch the batch first, draw random "
                              "numbers on the GPU with torch.rand(..., device=...))")
        self._refuse_host_draw(core, positions)
        copy = host_tensor_copy(core, functions, outside=body[:start] + hoisted)
        if copy:
            call, what = copy
            raise self.refuse(f"line {positions[call].start.line}: {what} copies a tensor made on the host to the GPU "
                              "inside the step; a capture cannot copy from pageable host memory (it fails on the "
                              "sync): build it on the GPU (device=...) or once before the loop")
        before = [s for s in body[:start] if not is_zero_grad(s)]
        # a zero_grad after the step stays, after the replay: the graph's backward writes the
        # gradients afresh, but what reads them before the next step, or after the loop, reads
        # eager's zeros (``zero_grad(set_to_none=False)`` at the end of the body, then the
        # gradients' sum printed after the loop: the rewrite's was the last step's)
        post = body[end + 1:]
        if not accumulate and any(is_zero_grad(s) for s in body[:end + 1]):
            self.zero_grad_dropped = True
        # everything the step reads that changes from one iteration to the next is an input:
        # the batch, the loop's own targets, names the body assigns before the step
        # (a name the step binds before reading it is its own, whatever discovery guessed)
        read = set().union(*map(names_read, core))
        assigned = set().union(*map(names_assigned, core))
        bound = assigned | set().union(*(names_rebound(s) for s in core))   # a `for name, p in ...` of its own too
        read = {name for name in read if name not in bound or name in read_first(core)}
        # any name bound anywhere in the loops around the step, outside it, may differ from one
        # iteration to the next: the batch fetched after the step (`X, Y = get_batch()` at the end
        # of the body, for the next iteration) is an input too, never a value the capture bakes in
        rebound = names_rebound(outer, skip=steps)
        variant = list(dict.fromkeys([*spec.batch, *plain_target_names(loop.target)] if isinstance(loop, cst.For) else
                                     spec.batch)) + self.step_params + sorted(rebound) + list(picks.values())
        inputs = list(dict.fromkeys(name for name in variant if name in read))
        self._refuse_varying_numbers(inputs, outer, core, positions, steps, unmovable)
        self._refuse_values_set_around(outer, core, steps, positions)
        self._refuse_state_kept_on_the_host(outer, core, steps, positions)
        self._refuse_stores_into_inputs(core, inputs, positions)
        self._refuse_gradients_of_inputs(body, inputs, positions)
        # state carried from one iteration to the next (`hidden = model(x, hidden)`): read before
        # the step binds it, so it goes in as an input and comes back as an output
        carried = [name for name in sorted(read_first(core) & assigned) if name not in inputs]
        unbound = [name for name in carried if name not in self._bound_on_every_path_to(outer)]
        if unbound and not isinstance(scope, cst.FunctionDef):
            raise self.refuse(f"the step carries {unbound[0]!r} from one iteration to the next, but {unbound[0]!r} is "
                              "not bound before the loop on every path (it is bound under an if); a captured step "
                              "needs its first value")
        self._refuse_numbers_carried([n for n in [*inputs, *carried] if n in assigned], scope, steps, positions)
        # in a function: bound to None at its start, so that the replay's argument exists on the
        # path that never binds it (the word-language-model example's Transformer has no `hidden`)
        self.declared = (scope, unbound)
        inputs += carried
        returns = self._live_outs(core, inputs, scope, positions, aliases, steps)
        # an attribute the step sets (minGPT's `self.loss`) comes back and is set again at each
        # replay: after a batch of another shape ran eagerly it would otherwise keep that value
        # ; not one set through a loop's own name (``for p in model.parameters(): p.grad = None``:
        # each of the objects it went through, not one the loop could set again)
        looped = {name for statement in core for loop in nodes(statement, cst.For) for name in plain_target_names(loop.target)}
        returns += sorted({p for statement in core for p in names_assigned(statement, paths=True)
                           if "." in p and p.split(".")[0] not in looped})
        self._refuse_argument_checks(core, positions)
        step_def = self._step_function(core, inputs, returns, accumulate)
        call = f"_cg_step_graph({', '.join(inputs)})"
        self.helper_inputs = len(inputs)
        target = ", ".join(returns)
        line = f"{target} = {call}  # cg-advise: replays the captured step\n" if returns else f"{call}\n"
        new_body = before + hoisted + list(cst.parse_module(line).body) + moved + post
        models = self._model_names() + self._other_modules(core, inputs, assigned, scope)
        # a value kept past the next replay (appended to a list, bound to another name) would be
        # overwritten by it: the helper then hands out copies
        clone = ", clone_outputs=True" if keeps_reference([outer], set(returns), skip=steps) else ""
        clone += ", accumulate=True" if accumulate else ""
        if self.optimizer_outside or accumulate:   # its step runs eagerly after each replay
            clone += ", optimizers_in_graph=False"
        changed = changed_in_place(core, set(inputs), self.functions)
        if changed:   # `x.mul_(0.5)` on the loop's batch: the replay changes the graph's copy, copied back
            clone += f", changed_inputs={[inputs.index(name) for name in changed]}"
        clone += self._state_outside(core, set(inputs) | assigned, models)
        clone += self._watched(core, set(inputs) | bound, scope, scope)
        if self.ddp:   # only full_iteration_allreduce_outside gets here with DDP (_check_ddp)
            # captured under its no_sync(), all-reduced after each replay; None on a path without DDP
            clone += f", allreduce=_cg_if_ddp({self.ddp.name})"
        unchecked = NO_ARGUMENT_CHECKS if uses_distributions(self.module) else ""
        setup = [step_def] + list(cst.parse_module(
            unchecked + f"_cg_step_graph = _CgFullIterationGraph(_cg_step, [{', '.join(optimizers)}], "
            f"[{', '.join(models)}]{clone})\n").body)
        return setup, loop.with_changes(body=loop.body.with_changes(body=new_body))

    def _other_modules(self, core, inputs, assigned, scope) -> list:
        """The names bound outside the step that the step calls as ``name(...)``, besides the
        models (a mean teacher's ``ema_model(noisy)``, run in train mode): the helper keeps those
        that are modules when it runs, so that what the warm-up's steps change in them
        (BatchNorm's running statistics) is put back with the models (the sweep of 2026-11-30:
        the teacher counted 63 batches where eager counts 60)."""
        known = set(self._model_names()) | set(self._optimizers()) | set(inputs) | assigned
        bound = {n for a in nodes(self.module, (cst.Assign,)) for t in a.targets for n in plain_target_names(t.target)}
        if isinstance(scope, cst.FunctionDef):
            bound |= set(parameter_names(scope))
        called = [c.func.value for s in core for c in calls_in(s, lambda c: isinstance(c.func, cst.Name))]
        return [name for name in dict.fromkeys(called) if name in bound and name not in known
                and name not in self.functions]

    def _prepared_share(self, core, outside) -> float:
        """Of the statements that do work (a call or an operator) between the batch's copy to the
        GPU (the last statement before the step that calls ``.to`` or ``.cuda``; without one in
        sight, a copy in a helper, from the body's start) and the first model call, the share the
        graph captures: FixMatch's augmentation, all of it; a loop that scales and draws a flip
        mask before the step begins and augments with it inside, three of five. In an eager trace
        their launches lie between iterations (which begin at the forward), as host time no graph
        would take in; this graph takes in its share (FixMatch predicted 2.72x without, 3.91x
        with, measured 3.52x: bench/results/paired_timing/timing_span_2026-11-27/).
        ``outside``: the statements of the body that stay before the replay, in source order."""
        models = set(self._model_names())
        called = {f"{m}{suffix}" for m in models for suffix in ("", ".module", ".forward")}

        def calls_model(call) -> bool:   # model(x), model.module(x), or a helper given the model
            return dotted(call.func) in called or any(dotted(arg.value) in models for arg in call.args)

        first = next((i for i, s in enumerate(core) if calls_in(s, calls_model)), 0)
        inside = sum(1 for s in core[:first] if nodes(s, TENSOR_WORK))
        copies = lambda c: isinstance(c.func, cst.Attribute) and c.func.attr.value in MOVE_METHODS  # noqa: E731
        copied = [i for i, s in enumerate(outside) if calls_in(s, copies)]
        left = sum(1 for s in outside[copied[-1] + 1 if copied else 0:] if nodes(s, TENSOR_WORK))
        return inside / (inside + left) if inside else 0.0

    def _refuse_varying_numbers(self, inputs, outer, core, positions, steps, unmovable) -> None:
        """A plain Python number that changes every iteration (a loop counter, a loss weight
        ramped from it) read by the step: the graph holds its first value, so the helper runs
        every step with another value eagerly, a rewrite that replays nothing (tune measured
        `ran-eagerly`, the profile a gain). Refused, saying how to keep it in a graph. ``steps``:
        the step's statements as the source holds them; ``unmovable``: why each container picked
        by a counter could not be picked before the replay (``safe_pick_containers``)."""
        numbers = varying_numbers(outer, skip=steps, module=self.module)
        found = [name for name in inputs if name in numbers]
        if found:
            name = found[0]
            line = positions[numbers[name]].start.line
            index = indexed_by(core, name)
            if index is not None:   # the counter picks the batch: bound before the step, the batch is an input
                code = code_of(index)
                why = unmovable.get(index.value.value) or "it may not run at every step"
                raise self.refuse(f"line {positions[index].start.line}: the step picks its batch with the loop's "
                                  f"counter ({code}), which a graph would capture as one index (every step after it "
                                  f"would run eagerly), and the pick cannot be read before the replay: {why} "
                                  "(fwd_bwd leaves it eager)")
            raise self.refuse(f"line {line}: {name!r} is a Python number the loop changes and the step reads; a graph "
                              "captures one value, so every step after it changes would run eagerly (keep it in a "
                              f"tensor updated in place, e.g. {name}_t.fill_({name}), and use that in the step)")

    def _refuse_host_draw(self, statements, positions) -> None:
        """A random draw on the host inside the step (``host_draw``: mixup's
        ``Beta(...).sample().to(device)`` failed the capture on its copy; ``torch.rand(1)`` would
        be drawn once): refused, saying how to draw on the GPU."""
        found = host_draw(statements, self.functions, self.module)
        if found is not None:
            call, why = found
            raise self.refuse(f"line {positions[call].start.line}: {code_of(call)} in the step "
                              f"{why}; a graph runs it only while it captures (draw on the GPU with device=..., from "
                              "the default generator, or build the distribution from tensors on the GPU)")

    def _refuse_data_dependent_shape(self, statements, positions) -> None:
        """An operation in the step whose result's size depends on the values (``out[mask]``,
        ``nonzero``): its host sync fails the capture, so the rewrite would crash where it runs."""
        # and in the script's functions (a trainer's own methods) the step calls: SimCLR's
        # ``self.info_nce_loss`` drops the diagonal with ``similarity[~mask]``
        called = {dotted(c.func) for statement in statements for c in calls_through(statement, self.functions)}
        bodies = [self.functions[name] for name in sorted(called) if name in self.functions]
        found = data_dependent_shape(list(statements) + bodies, self.module)
        if found:
            node, what = found
            where = f"line {positions[node].start.line}" if node in positions else "a function the step calls"
            raise self.refuse(f"{where}: {code_of(node)} in the step is "
                              f"{what}, whose size depends on the values (a host sync a graph cannot hold); index "
                              "with positions found once before the loop (idx = mask.nonzero(as_tuple=True)[0], "
                              "then out[idx]) or weigh the loss by the mask")

    def _refuse_stores_into_inputs(self, core, inputs, positions) -> None:
        """A change of an input's structure (``batch["pred"] = out``, ``labels = batch.pop("labels")``,
        ``changes_structure``): the graph's warm-up and capture would make it on its copy of the
        batch, again and again (a second pop fails), and the loop's batch would never get it. (An
        in-place change of an input's tensors is copied back: ``changed_inputs``.)"""
        node = changes_structure(core, set(inputs), self.functions)
        if node is not None:
            raise self.refuse(f"line {positions[node].start.line}: the step changes the batch it is handed "
                              f"({code_of(node).strip()}): a graph would change its own copy, "
                              "and only while it captures (read it without changing it: labels = batch['labels'])")

    def _refuse_gradients_of_inputs(self, body, inputs, positions) -> None:
        """An input made to require grad, or whose gradient is read, anywhere in the loop's body
        (FGSM's ``images.requires_grad_(True)`` then ``images.grad.sign()``: ``gradient_of_input``):
        the graph's copy of the batch is detached, so the warm-up would fail on a missing
        gradient, or the backward would stop at the copy."""
        node = gradient_of_input(body, set(inputs), self.functions)
        if node is not None:
            raise self.refuse(f"line {positions[node].start.line}: the loop takes the gradient of the batch "
                              f"({code_of(node).strip()}); a graph's copy of the batch has none")

    def _refuse_state_kept_on_the_host(self, outer, core, steps, positions) -> None:
        """State a graph cannot follow, found by the third sweep of 2026-11-30: a tensor made on
        the host and changed in place by the loop (a KL weight warmed up with
        ``kl_weight.fill_(...)``: a CPU scalar enters the capture as a constant); a method of the
        script's modules the step calls that keeps Python state on its object (Lightning's
        ``self.training_step_outputs.append(loss)``: four entries from the warm-up and capture,
        none from the replays); a method called outside the step that sets attributes on an
        object the step calls (a distillation loss's ``criterion.set_epoch(epoch)`` setting its
        temperature, which its forward reads)."""
        host = {n for a in nodes(self.module, (cst.Assign,)) if host_scalar(a.value)
                for t in a.targets for n in plain_target_names(t.target)}
        read = set().union(*map(names_read, core))
        changed = changed_in_place([outer], host & read)
        if changed:
            raise self.refuse(f"the step reads {changed[0]!r}, a tensor on the host that the loop changes in place; "
                              "a capture takes its value as a constant (make it on the GPU: device=...)")
        classes = [c for c in nodes(self.module, (cst.ClassDef,))
                   if any("Module" in dotted(b.value) for b in c.bases)]
        methods = {f.name.value: f for c in classes for f in c.body.body if isinstance(f, cst.FunctionDef)
                   and f.name.value not in ("__init__", "forward", "__call__")}
        for statement in core:
            for call in calls_in(statement, lambda c: isinstance(c.func, cst.Attribute) and c.func.attr.value in methods):
                method = methods[call.func.attr.value]
                kept = [n for n in nodes(method.body, (cst.Call, cst.AugAssign)) if (
                    root_name(n.target) == "self" if isinstance(n, cst.AugAssign) else
                    isinstance(n.func, cst.Attribute) and n.func.attr.value in STORE_METHODS + CONTAINER_METHODS
                    and root_name(n.func.value) == "self")]
                if kept:
                    raise self.refuse(f"line {positions[call].start.line}: {method.name.value}() keeps Python state on "
                                      f"its object ({code_of(kept[0]).strip()}); a graph runs it "
                                      "only while it captures (keep it after the step, in the loop)")
        called = objects_called(core)
        for call in nodes(outer, (cst.Call,), skip=steps):
            if not (isinstance(call.func, cst.Attribute) and dotted(call.func.value) in called
                    and call.func.attr.value in methods):
                continue
            sets = [a for a in nodes(methods[call.func.attr.value].body, (cst.Assign, cst.AugAssign))
                    if any(root_name(t) == "self" and isinstance(t, cst.Attribute) for t in (
                        [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]))]
            if sets:
                raise self.refuse(f"line {positions[call].start.line}: {code_of(call)} sets "
                                  f"attributes of an object the step calls ({code_of(sets[0]).strip()}"
                                  "); a graph would read the value of its capture at every replay (keep it in a tensor "
                                  "updated in place)")

    def _refuse_values_set_around(self, outer, core, steps, positions) -> None:
        """A value the loop sets through an attribute or a constant key outside the step and
        the step reads (``cfg["scale"] = 1 / (i + 1)``, ``self.hidden = hidden.detach()``): a
        graph holds what it read at capture, a Python value or a tensor object, so every replay
        would read that (found by the review of 2026-11-30)."""
        set_around = {}
        for node in nodes(outer, (cst.Assign, cst.AugAssign), skip=steps):
            for target in (node.targets if isinstance(node, cst.Assign) else [node]):
                path = keyed_path(target.target)
                if path:
                    set_around.setdefault(path, node)
        found = sorted(set_around.keys() & set().union(*map(keyed_paths_read, core)))
        # set on an object the step calls (`self.criterion.gamma = ...` around, `self.criterion(...)`
        # inside): its forward reads it (the sweep's focal loss kept gamma's first value)
        called = objects_called(core)
        found += sorted(path for path in set_around if "." in path and (
            path.rsplit(".", 1)[0] in called
            or any(path.startswith(f"{m}.") for m in self._model_names())))   # a fast.ai callback's model.drop.p = ...
        if found:
            raise self.refuse(f"line {positions[set_around[found[0]]].start.line}: the loop sets {found[0]} outside the "
                              "step, which the step reads; a graph would read the value of its capture at every "
                              "replay (keep it in a tensor updated in place, or set it inside the step)")

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
                names |= set().union(*map(names_assigned, [s for s in statements[:statements.index(node)]
                                                           if isinstance(s, cst.SimpleStatementLine)]))
            if isinstance(block, cst.FunctionDef):
                names |= set(parameter_names(block))
                break
            node = block
        return names

    def _live_outs(self, core, inputs, scope, positions, aliases, steps) -> list:
        """Names the step binds that anything else in the enclosing function (or module) reads:
        code further down the loop body, the next iteration (the body before the step, a
        `while` condition), code after the loop (`return loss`, `print(f"{loss}")`,
        `outputs.logits`), an outer loop. They come back from the graph and are re-bound in
        the loop; inside the captured function alone they would vanish with it. A read that
        finds the name bound again first (``tuner.dataflow.live_reads``: PPO's ``dist`` made
        afresh at each rollout) does not count. State the step carries to its next run (an
        RNN's hidden state) is an input and comes back too."""
        assigned = set().union(*map(names_assigned, core))
        read = live_reads(scope, assigned, steps, self.parents)
        returns = sorted(assigned & (read | set(aliases) | set(inputs)))
        for name in returns:
            value = host_value_binding(core, name)
            if value is not None:
                line = positions[value].start.line
                raise self.refuse(f"line {line}: {name!r} is read after the step but holds a Python value "
                                  f"({code_of(value.value)}), which a replayed graph "
                                  "cannot update; compute it after the step")
        return returns

    @staticmethod
    def _after_the_replay(window) -> set:
        """The ids of the step's statements that only work on what its host reads bind, and can
        run after the replay with them: torchvision's ``loss_dict_reduced = {k: v.item() ...}``,
        then ``loss_value = sum(loss_dict_reduced.values())`` and ``if not
        math.isfinite(loss_value): sys.exit(1)`` before the backward (refused before: the read
        "fed the step"). Exit guards (``is_exit_guard``) always; plain statements reading a host
        read's names, transitively, where nothing else in the step reads what they bind (else
        none: the host read then feeds the step, as before)."""
        host = set().union(*(names_assigned(s) for s in window if has_sync(s)))
        chain = set()
        changed = True
        while changed:
            changed = False
            for s in window:
                if (id(s) not in chain and isinstance(s, cst.SimpleStatementLine) and not has_sync(s)
                        and not calls_backward(s) and names_read(s) & host):
                    chain.add(id(s))
                    host |= names_assigned(s)
                    changed = True
        guards = {id(s) for s in window if is_exit_guard(s)}
        kept = [s for s in window if id(s) not in chain | guards and not has_sync(s)]
        bound = set().union(*(names_assigned(s) for s in window if id(s) in chain))
        if any(names_read(s) & bound for s in kept):
            chain = set()
        return chain | guards

    def _refuse_numbers_carried(self, carried, scope, steps, positions) -> None:
        """State the step carries that starts as a Python number outside it (``correct = 0`` each
        epoch, then ``correct += (pred == y).sum()`` in the step): the first call of each epoch is
        handed a number, the others a tensor, so no call after the capture matches it and every
        step runs eagerly (the sweep of 2026-11-30f replayed 4 of 200)."""
        for assign in nodes(scope, (cst.Assign,), skip=steps):
            names = {n for t in assign.targets for n in plain_target_names(t.target)} & set(carried)
            if names and is_number_expression(assign.value, set()):
                name = sorted(names)[0]
                raise self.refuse(f"line {positions[assign].start.line}: {name!r} starts as a Python number "
                                  f"({code_of(assign).strip()}) and the step makes it a tensor: "
                                  "a graph is handed a number at the first call and a tensor after, so every call "
                                  f"would run eagerly (start it as a tensor: {name} = torch.zeros((), device=...))")

    def _refuse_argument_checks(self, core, positions) -> None:
        """A distribution built asking for its argument checks (``Normal(mu, sigma,
        validate_args=True)``, or ``Normal(mu, sigma, True)`` by position): a host sync that
        the default the rewrite turns off (NO_ARGUMENT_CHECKS) does not take out. In the step
        first; then anywhere in the script, since the step may use an object built before the
        loop (a prior whose ``log_prob`` it calls) or in a method it calls (CleanRL's
        ``agent.get_action_and_value``), which the patch cannot tell apart from one it never
        reaches. ``None`` asks for the default, which the rewrite sets off."""
        distributions = uses_distributions(self.module)
        names = distribution_names(self.module) if distributions else {}
        in_step = [call for statement in core for call in nodes(statement, cst.Call)]
        for call in in_step + (list(nodes(self.module, cst.Call)) if distributions else []):
            given = [a.value for a in call.args if a.keyword is not None and a.keyword.value == "validate_args"]
            if not given and distributions:
                given = positional_validate_args(call, names)
            if not given or isinstance(given[0], cst.Name) and given[0].value in ("False", "None"):
                continue
            try:
                where = f"line {positions[call].start.line}: "
            except KeyError:   # a call inside a statement the rewrite rebuilt
                where = ""
            asks = (f"{where}{dotted(call.func) or 'a call'}(..., validate_args="
                    f"{code_of(given[0])}) checks its arguments on the host")
            if any(call is c for c in in_step):
                raise self.refuse(f"{asks}, a sync a captured step cannot hold; build it with validate_args=False")
            raise self.refuse(f"{asks}, a sync a captured step cannot hold if the step uses it (the patch cannot "
                              "tell); build it with validate_args=False")

    def _optimizer_steps_in_graphs(self) -> bool:
        """Is the optimizer one whose step can be captured? SGD and the capturable families can;
        an optimizer built elsewhere (a function's parameter) is assumed to be one of those (the
        helper makes it capturable); a class we do not know keeps its step eager."""
        assignments = _Assignments()
        self.module.visit(assignments)
        built = [callee.split(".")[-1] for o in self._optimizers() for callee in assignments.callees.get(o, [])]
        return all(name in CAPTURABLE_OPTIMIZERS + ("SGD",) or self._builds_capturable(name) for name in built)

    def _builds_capturable(self, name: str) -> bool:
        """Whether the script's functions or methods called ``name`` return only optimizers that
        can step in a graph (a Trainer's ``self.configure_optimizers()`` returning an AdamW), as
        their ``return`` shows: a call of the class, or a name bound from one."""
        defined = [f for f in nodes(self.module, cst.FunctionDef) if f.name.value == name]
        classes = []
        for function in defined:
            made = {n: a.value for a in nodes(function.body, cst.Assign) if isinstance(a.value, cst.Call)
                    for t in a.targets for n in plain_target_names(t.target)}
            for ret in nodes(function.body, cst.Return):
                value = made.get(dotted(ret.value)) if isinstance(ret.value, cst.Name) else ret.value
                classes.append(dotted(value.func).split(".")[-1] if isinstance(value, cst.Call) else "")
        return bool(classes) and all(c in CAPTURABLE_OPTIMIZERS + ("SGD",) for c in classes)

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
                "Forward, loss and backward, captured by cg-advise without DDP's all-reduce; the gradients are "
                "all-reduced and the optimizer steps after each replay." if self.scope == ALLREDUCE_OUTSIDE else
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


PROPERTIES = ("property", "cached_property")   # what makes a method read as an attribute


def steps_scaler(call: cst.Call) -> bool:
    """``scaler.scale(...)``, ``scaler.unscale_(...)``, or a ``step`` given an argument (a
    GradScaler's ``scaler.step(optimizer)``, a scheduler's ``step(epoch)``): the optimizer step
    stays out of a graph where one of them runs."""
    return (is_method(call, None, "step") and bool(call.args)) or is_method(call, None, "scale") \
        or is_method(call, None, "unscale_")


def local_names(function: cst.FunctionDef) -> set:
    """The names ``function`` binds as its own: its parameters and what it binds, but the
    globals it declares."""
    return (names_rebound(function) | set(parameter_names(function))) - declared_global(function.body)


def uses_distributions(module: cst.Module) -> bool:
    """Whether the script reaches torch.distributions: imports from it (``from
    torch.distributions import Categorical``, ``import torch.distributions as D``, ``from torch
    import distributions``) or names it through torch (``torch.distributions.Normal``, ``th.distributions``)."""
    for node in nodes(module, (cst.Import, cst.ImportFrom, cst.Attribute)):
        if isinstance(node, cst.Import):
            if any(dotted(alias.name).startswith("torch.distributions") for alias in node.names):
                return True
        elif isinstance(node, cst.ImportFrom):
            path = dotted(node.module) if node.module is not None else ""
            if path.startswith("torch.distributions") or (path == "torch" and not isinstance(node.names, cst.ImportStar)
                                                          and any(dotted(a.name) == "distributions" for a in node.names)):
                return True
        elif node.attr.value == "distributions" and dotted(node.value):
            return True
    return False


# where ``validate_args`` falls among the positional parameters of each torch.distributions
# class, the last of them (a test reads them off the installed torch's signatures): the third
# of ``Normal(loc, scale, validate_args)``, the fifth of ``MultivariateNormal``. A table, since
# patch runs without torch
VALIDATE_ARGS_POSITION = {
    "Bernoulli": 2, "Beta": 2, "Binomial": 3, "Categorical": 2, "Cauchy": 2, "Chi2": 1, "ContinuousBernoulli": 3,
    "Dirichlet": 1, "Exponential": 1, "FisherSnedecor": 2, "Gamma": 2, "GeneralizedPareto": 3, "Geometric": 2,
    "Gumbel": 2, "HalfCauchy": 1, "HalfNormal": 1, "Independent": 2, "InverseGamma": 2, "Kumaraswamy": 2,
    "LKJCholesky": 2, "Laplace": 2, "LogNormal": 2, "LogisticNormal": 2, "LowRankMultivariateNormal": 3,
    "MixtureSameFamily": 2, "Multinomial": 3, "MultivariateNormal": 4, "NegativeBinomial": 3, "Normal": 2,
    "OneHotCategorical": 2, "OneHotCategoricalStraightThrough": 2, "Pareto": 2, "Poisson": 1, "RelaxedBernoulli": 3,
    "RelaxedOneHotCategorical": 3, "StudentT": 3, "TransformedDistribution": 2, "Uniform": 2, "VonMises": 2,
    "Weibull": 2, "Wishart": 4,
}


def distribution_names(module: cst.Module) -> dict:
    """{name the script calls: torch.distributions class} for the classes it imports bare
    (``from torch.distributions import Normal as N``, ``from torch.distributions.normal import
    Normal``, every class under ``import *``), less the names it defines or binds itself (a
    class of its own named ``Uniform``)."""
    names = {}
    for node in nodes(module, cst.ImportFrom):
        path = dotted(node.module) if node.module is not None else ""
        if not path.startswith("torch.distributions"):
            continue
        if isinstance(node.names, cst.ImportStar):
            names.update({name: name for name in VALIDATE_ARGS_POSITION})
            continue
        for alias in node.names:
            name = dotted(alias.name)
            if name in VALIDATE_ARGS_POSITION:
                local = dotted(alias.asname.name) if alias.asname is not None else name
                names[local] = name
    own = {n.name.value for n in nodes(module, (cst.ClassDef, cst.FunctionDef))}
    own |= set().union(*map(names_assigned, module.body))   # bound at module level (``N = ...``)
    return {local: name for local, name in names.items() if local not in own}


def distribution_class(call: cst.Call, names: dict) -> Optional[str]:
    """The torch.distributions class ``call`` builds, named bare as the script imported it
    (``names``: ``distribution_names``) or through a module (``D.Normal``,
    ``torch.distributions.Normal``); None for any other call."""
    path = dotted(call.func) or ""
    name = names.get(path) if "." not in path else path.rsplit(".", 1)[1]
    return name if name in VALIDATE_ARGS_POSITION else None


def positional_validate_args(call: cst.Call, names: dict) -> list:
    """The value a call to a torch.distributions class (``distribution_class``) passes as
    ``validate_args`` by position ([] if none), in a script that uses torch.distributions. Only
    the arguments before a starred one count: past it the places are unknown."""
    index = VALIDATE_ARGS_POSITION.get(distribution_class(call, names) or "")
    if index is None:
        return []
    positional = []
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            break
        positional.append(arg)
    return [positional[index].value] if index < len(positional) else []


@functools.cache
def reserved_names() -> frozenset:
    """The names the rewrite itself binds (the helper's, the step's, its aliases' prefix): a picked
    batch's name is none of them, nor a name the script uses. Read once, at the first
    full-iteration rewrite, not when the module is imported."""
    here = Path(__file__)
    return frozenset(re.findall(r"\b_cg_\w+", "".join((here.parent / name).read_text()
                                                         for name in (here.name, "templates.py", "hygiene.py"))))


class _Positions:
    """The parsed source's positions, read through a rewrite of the step: a node the rewrite
    rebuilt (``tuner.dataflow.hoist_picks``) answers with the position of the one it replaced."""

    def __init__(self, positions, originals: dict) -> None:
        self._positions, self._originals = positions, originals

    def __getitem__(self, node):
        rebuilt, original = self._originals.get(id(node), (None, None))
        return self._positions[original if rebuilt is node else node]


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


def _with_call_replaced(statement, call, replacement, comment: str):
    """``statement`` with ``call`` (a node of it) replaced, and ``comment`` at its end."""

    class Replace(cst.CSTTransformer):
        def leave_Call(self, original, updated):
            return replacement if original is call else updated

    replaced = statement.visit(Replace())
    return replaced.with_changes(trailing_whitespace=cst.TrailingWhitespace(
        whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment(comment)))


def _bound_as(targets) -> str:
    """``"loss = "`` for an assignment's targets, ``"running += "`` for an augmented assignment."""
    return code_of(targets.target) + code_of(targets.operator) if isinstance(targets, cst.AugAssign) else f"{code_of(targets)} = "


def _with_keyword(call: cst.Call, name: str, value: str) -> cst.Call:
    """``f(a, name=x)`` -> ``f(a, name=value)``: the keyword set last, any earlier one dropped."""
    args = [a for a in call.args if not (a.keyword and a.keyword.value == name)]
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    arg = cst.Arg(keyword=cst.Name(name), value=cst.parse_expression(value),
                  equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    return call.with_changes(args=[*args, arg])


GRAD_MODE_CONTEXTS = (*NO_GRAD, "set_grad_enabled", "enable_grad", "autocast")


def _sets_grad_mode(item) -> bool:
    """A ``with`` item that only sets grad mode or autocast (``torch.set_grad_enabled(...)``,
    ``torch.autocast(...)``), which runs its body whatever it holds."""
    called = dotted(item.func) if isinstance(item, cst.Call) else ""
    return called.rpartition(".")[2] in GRAD_MODE_CONTEXTS


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

    def __init__(self, loop, new_loop, outer, before, declared=(None, ()), function_rewrite=None):
        self.loop, self.new_loop, self.outer, self.before = loop, new_loop, outer, before
        self.function, self.declared = declared
        self.function_rewrite = function_rewrite   # (a step function, the statements that replace it)
        self.inserted = False

    def leave_FunctionDef(self, original, updated):
        if self.function_rewrite and original is self.function_rewrite[0]:
            new_function, *added = self.function_rewrite[1]
            blank = [cst.EmptyLine(indent=False)] * 2
            return cst.FlattenSentinel([new_function, *(s.with_changes(leading_lines=blank) for s in added)])
        if original is not self.function or not self.declared:
            return updated
        body = list(updated.body.body)
        docstring = 1 if body and is_docstring(body[0]) else 0
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
            if not self.before:   # the setup went beside a step function (``_captured_in_function``)
                return updated
            first, *rest = self.before
            blank = [cst.EmptyLine(indent=False)]
            leading = updated.leading_lines or (blank if isinstance(first, cst.FunctionDef) else [])
            before = [first.with_changes(leading_lines=leading)]
            before += [s.with_changes(leading_lines=blank) if isinstance(s, cst.SimpleStatementLine)
                       and isinstance(first, cst.FunctionDef) else s for s in rest]
            return cst.FlattenSentinel([*before, updated.with_changes(leading_lines=blank)])
        return updated


def _last_import(body) -> int:
    return max((i for i, s in enumerate(body) if isinstance(s, cst.SimpleStatementLine)
                and isinstance(s.body[0], (cst.Import, cst.ImportFrom))), default=-1)


def _imports_torch(body) -> bool:
    """Whether ``body`` binds the name ``torch`` by ``import torch`` (``import torch as th``
    binds ``th`` only)."""
    return any(isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Import)
               and any(dotted(a.name) == "torch" and (a.asname is None or dotted(a.asname.name) == "torch")
                       for a in s.body[0].names) for s in body)


def _with_import(module: cst.Module, line: str, present=None) -> cst.Module:
    """``line`` (an import) after the last top-level import unless ``present(body)`` says the
    module has it: ``import torch`` for a rewrite that names torch in a script that only imports
    it indirectly (its model and data come from a module of its own)."""
    body = list(module.body)
    if present is not None and present(body):
        return module
    at = _last_import(body) + 1
    return module.with_changes(body=body[:at] + list(cst.parse_module(line).body) + body[at:])


def _with_first_import(module: cst.Module, line: str) -> cst.Module:
    """``line`` (an import) before every statement of the module but its docstring and
    ``from __future__`` imports: before any use, whichever import comes after the loop."""
    body = list(module.body)
    at = 1 if body and is_docstring(body[0]) else 0
    while at < len(body) and isinstance(body[at], cst.SimpleStatementLine) and isinstance(body[at].body[0], cst.ImportFrom) \
            and body[at].body[0].module is not None and dotted(body[at].body[0].module) == "__future__":
        at += 1
    return module.with_changes(body=body[:at] + list(cst.parse_module(line).body) + body[at:])


def _add_helper(module: cst.Module, scope: str, extra: str = "", rebound: frozenset = frozenset(),
                routed: bool = False) -> cst.Module:
    """The helper goes after the last top-level import, or before the first top-level statement
    that calls it where that comes sooner (``model = DDP(...)`` built before a later import);
    ``import torch`` added if nothing before it imports torch. The builtins it reads that the
    script binds at module level (``rebound``) it reads through ``_cg_builtins``, imported with
    it then or where code emitted beside the loop does (``routed``)."""
    body = list(module.body)
    helper, changed = route_builtins(cst.parse_module(HELPERS[scope] + extra), rebound)
    helper = list(cst.parse_module(BUILTINS_IMPORT).body if changed or routed else []) + list(helper.body)
    defined = {s.name.value for s in helper if isinstance(s, cst.FunctionDef)}
    first_use = next((i for i, s in enumerate(body)
                      if calls_in(s, lambda c: isinstance(c.func, cst.Name) and c.func.value in defined)), len(body))
    last_import = min(_last_import(body), first_use - 1)
    has_torch = _imports_torch(body[:last_import + 1])
    imports = [s for s in helper if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Import)]
    helper = helper[len(imports):]  # the helper's own imports join the file's
    helper[0] = helper[0].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    extra = ([] if has_torch else list(cst.parse_module("import torch\n").body)) + [
        i.with_changes(leading_lines=[]) for i in imports]
    return module.with_changes(body=body[:last_import + 1] + extra + helper + body[last_import + 1:])
