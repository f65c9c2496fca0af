"""The word-language-model example as it is: the hidden state exists only for a recurrent model
(bound under an if before the loop, used under an if in it); a feed-forward model (CG_MODEL=MLP)
never binds it."""
import os

import torch
from torch import nn
import copy as _cg_copy
import dataclasses as _cg_dataclasses
import enum as _cg_enum
import types as _cg_types
import warnings as _cg_warnings
import weakref as _cg_weakref
import torch.utils._pytree as _cg_pytree


class _CgForward:
    """cg-advise: the forward a graphed module calls (its graphs, or its eager forward); to
    copy.deepcopy (a best model kept, an EMA copy made later) and to pickle (torch.save of the
    whole module) it is the module's own eager forward, so that a copy never replays the
    original's graphs and a saved module loads without cg-advise."""

    def __init__(self, run, module):
        self.run, self.module = run, module

    def __call__(self, *inputs, **kwargs):
        return self.run(*inputs, **kwargs)

    @property
    def __code__(self):   # read by torch.export (non-strict) of the module
        return type(self.module).forward.__code__

    def __reduce__(self):   # unpickled: the loaded module's own forward, bound to it
        return getattr, (self.module, "forward")

    def __deepcopy__(self, memo):
        return _cg_types.MethodType(type(self.module).forward, _cg_copy.deepcopy(self.module, memo))


def _cg_exporting():
    # traced (torch.jit.trace, an ONNX export) or compiled (torch.compile, torch.export): the
    # eager forward, whose operations the trace must hold, not the graph's replay
    compiling = getattr(torch.compiler, "is_compiling", None) or torch._utils.is_compiling   # before torch 2.3
    return torch.jit.is_tracing() or compiling()


def _cg_mode_layers(models):
    """cg-advise: the BatchNorm and dropout layers of ``models``: their mode changes what they
    compute (not every submodule's)."""
    return [m for model in models for m in model.modules()
            if isinstance(m, (torch.nn.modules.batchnorm._NormBase, torch.nn.modules.dropout._DropoutNd))]


def _cg_layer_modes(layers):
    """cg-advise: what a capture holds of each of ``layers`` as a constant: its mode, and a
    dropout layer's p or a BatchNorm layer's momentum, where a script changes them between epochs."""
    return [(m.training, getattr(m, "p", None), getattr(m, "momentum", None)) for m in layers]


def _cg_output_tensors(out):
    """cg-advise: (the tensors of a forward's output, a function that builds the output again
    from such tensors): tensors in tuples, lists, dicts (a Hugging Face ModelOutput is one) and
    dataclasses; what is no tensor (None, a number) is kept as the capture made it."""
    if torch.is_tensor(out):
        return [out], next
    if isinstance(out, (tuple, list)):
        parts = [_cg_output_tensors(o) for o in out]
        fields = hasattr(out, "_fields")   # a namedtuple takes its fields one by one

        def build(it):
            made = [rebuild(it) for _, rebuild in parts]
            return type(out)(*made) if fields else type(out)(made)
    elif isinstance(out, dict) or (_cg_dataclasses.is_dataclass(out) and not isinstance(out, type)):
        items = out.items() if isinstance(out, dict) else ((f.name, getattr(out, f.name))
                                                            for f in _cg_dataclasses.fields(out))
        named = [(key, _cg_output_tensors(value)) for key, value in items]
        parts = [part for _, part in named]

        def build(it):
            made = _cg_copy.copy(out)
            for key, (_, rebuild) in named:
                if isinstance(made, dict):
                    made[key] = rebuild(it)
                else:
                    object.__setattr__(made, key, rebuild(it))
            return made
    elif _cg_plain_value(out):
        return [], lambda it: out
    else:   # a distribution, a namespace: its tensors would be the capture's, replayed never again
        raise _CgNotGraphable(f"its output holds a {type(out).__name__}")
    return [t for found, _ in parts for t in found], build


class _CgNotGraphable(Exception):
    """cg-advise: a call that make_graphed_callables cannot take as it is (said why)."""


def _cg_plain_value(value):
    # a value a capture may keep as it found it and compare by ==: a number, a flag, a string,
    # None, a dtype or device. Anything else (a module, an object holding tensors) may change
    # under the same identity, or carry parameters the graph would not differentiate
    return value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                                               torch.Size, _cg_enum.Enum))


class _CgPositional(torch.nn.Module):
    """cg-advise: a module's call as make_graphed_callables takes one: its tensors in as
    positional arguments (the call's own arguments and keyword arguments are built around them
    again, with the values that are no tensors as the capture saw them), its output's tensors
    out (``build`` makes the output again from a replay's)."""

    def __init__(self, module, forward, layout, leaves):
        torch.nn.Module.__init__(self)   # not super(): a patch may read the builtins through an alias
        self.inner = module   # its parameters and buffers are the graph's
        self.eager_forward, self.layout = forward, layout
        self.slots = [(torch.is_tensor(leaf), leaf) for leaf in leaves]
        self.build = None

    def forward(self, *tensors):
        it = iter(tensors)
        args, kwargs = _cg_pytree.tree_unflatten([next(it) if is_tensor else value for is_tensor, value in self.slots],
                                                 self.layout)
        found, self.build = _cg_output_tensors(self.eager_forward(*args, **kwargs))
        return tuple(found)


def _cg_call_key(leaves, layout):
    # what a replay must find as the capture did: the call's structure, each tensor's shape and
    # dtype, and every value that is no tensor (a flag, a None, a number)
    return (layout, [(tuple(t.shape), t.dtype) if torch.is_tensor(t) else (type(t), t) for t in leaves])


def _cg_same_key(key, captured):
    try:
        return bool(key == captured)
    except Exception:   # a value whose comparison is no single bool
        return False


def _cg_graph_forward(module, warmup=3, accumulate=False, clone_outputs=False):
    """cg-advise: on the first call in training, capture `module`'s forward and backward as
    CUDA graphs (torch.cuda.make_graphed_callables) and replay them after; a call of another
    structure, shape or non-tensor argument than the capture's, calls without grad or in the
    other train/eval mode, and CPU inputs run the eager forward. Tensors may come in tuples,
    lists, dicts and keyword arguments (a Hugging Face model's **batch), beside plain values (a
    flag, None, a number; a call given any other object, a module among them, runs eagerly);
    the output may hold them in those and in dataclasses (a module whose output holds anything
    else, a distribution, runs eagerly for good, with a warning). With `accumulate` (several backward
    passes per optimizer step, or gradients zeroed in place) each gradient is copied out of the
    graph's static buffer, which the next replay overwrites. A call made while the backward of
    the last replay is still to come (a layer run in a loop, a model called twice in a step,
    even where its first output was reduced at once: D(fake).mean() - D(real).mean()) runs
    eagerly: a replay would overwrite what that backward reads. The last replay's autograd node
    tells: its hook marks the backward done, and it is freed with a loss dropped unused. With
    `clone_outputs` (the loop keeps an output past the next call) each replay's outputs are
    copies: the graph's own output buffers are overwritten by the next replay."""
    if not isinstance(module, torch.nn.Module) or not any(p.requires_grad for p in module.parameters()):
        return module  # a function, or a module with nothing to train (a loss): stays eager
    if isinstance(vars(module).get("forward"), _CgForward):
        return module  # set up already (a train() called once per epoch): never a graph of a graph
    eager_forward = module.forward
    hooked = set()   # accumulate: the parameters whose gradient hook is registered
    state = {}
    refused = []     # why the module cannot be graphed (an output no capture can keep): eager for good
    mode_captures = [0]   # captures again for a layer's mode changed
    unlike = [0]          # calls in a row with inputs unlike the capture's

    def forward(*inputs, **kwargs):
        if not torch.is_grad_enabled() or _cg_exporting():
            return eager_forward(*inputs, **kwargs)
        leaves, layout = _cg_pytree.tree_flatten((inputs, kwargs))
        tensors = [t for t in leaves if torch.is_tensor(t)]
        if (refused or not tensors or not all(t.is_cuda for t in tensors)   # a CPU run stays eager
                or not all(torch.is_tensor(v) or _cg_plain_value(v) for v in leaves)):   # a module given, an object
            return eager_forward(*inputs, **kwargs)
        key = _cg_call_key(leaves, layout)
        if state and module.training != state["training"]:
            return eager_forward(*inputs, **kwargs)
        if state and not _cg_same_key(key, state["key"]):
            unlike[0] += 1
            if unlike[0] == 20:   # a batch of ever another shape (a curriculum's length): no replay, said once
                _cg_warnings.warn(f"cg-advise: {type(module).__name__} has been called with inputs unlike those it was "
                                  "captured with for 20 calls in a row (another shape, or another Python value); such "
                                  "calls run eagerly", stacklevel=2)
            return eager_forward(*inputs, **kwargs)
        unlike[0] = 0
        if state and [t.data_ptr() for t in state["anchors"]] != state["placed"]:
            # moved off the GPU and back since the capture (module.cpu() to save a checkpoint,
            # then .to(device)): its parameters hold new storage, the graphs the old
            state.clear()
        if state and _cg_layer_modes(state["layers"]) != state["modes"]:
            # a layer in another mode than at the capture, the module's own the same (its BatchNorm
            # frozen after a warm-up: model.apply(set_bn_eval) each epoch), or with another dropout
            # p or BatchNorm momentum: the graph holds the capture's. Captured again, twice at
            # most; eager past that
            if mode_captures[0] >= 2:
                return eager_forward(*inputs, **kwargs)
            mode_captures[0] += 1
            state.clear()
        needed = [t.requires_grad for t in tensors]
        if state and (any(p.requires_grad for p in state["frozen"]) or any(
                now and not then for now, then in zip(needed, state["needed"]))):
            # a parameter frozen at the capture and trained now (a backbone unfrozen), or an input
            # that needs its gradient now (the output of a layer before it, unfrozen): the backward
            # graph makes only the gradients needed at its capture. Captured again, for inputs
            # that needed one then too (a gradient made for nothing is dropped)
            needed = [now or then for now, then in zip(needed, state["needed"])]
            state.clear()
        if not state:
            if not any(p.requires_grad for p in module.parameters()):   # frozen whole: nothing to graph yet
                return eager_forward(*inputs, **kwargs)
            samples = tuple(t.detach().clone().requires_grad_(need) for t, need in zip(tensors, needed))
            positional = _CgPositional(module, eager_forward, layout, leaves)
            positional.training = module.training   # its flag alone: .train() would set every submodule's
            buffers = [(b, b.detach().clone()) for b in module.buffers()]
            try:
                torch.cuda.make_graphed_callables(positional, samples, num_warmup_iters=warmup)
            except _CgNotGraphable as why:
                refused.append(str(why))
                _cg_warnings.warn(f"cg-advise: {type(module).__name__} runs eagerly: {why}", stacklevel=2)
            with torch.no_grad():  # the warm-up ran forwards: put BatchNorm's running stats back
                for buffer, saved in buffers:
                    buffer.copy_(saved)
            if refused:
                return eager_forward(*inputs, **kwargs)
            if accumulate:
                for p in module.parameters():
                    if p.requires_grad and id(p) not in hooked:
                        p.register_hook(torch.clone)
                        hooked.add(id(p))
            layers = _cg_mode_layers([module])
            anchors = [*module.parameters(), *module.buffers()]   # each one: a move leaves some at their addresses
            state.update(positional=positional, key=key, needed=needed, training=module.training,
                         layers=layers, modes=_cg_layer_modes(layers), anchors=anchors,
                         placed=[t.data_ptr() for t in anchors],
                         frozen=[p for p in module.parameters() if not p.requires_grad])
        if not state.get("done", True) and state["pending"]() is not None:
            if not state.get("warned"):
                state["warned"] = True
                _cg_warnings.warn(f"cg-advise: {type(module).__name__} is called again before the backward of its "
                                  "last call (in a loop, twice in a step, or a step skipped with its loss kept); "
                                  "such calls run eagerly", stacklevel=2)
            return eager_forward(*inputs, **kwargs)
        positional = state["positional"]
        found = positional(*tensors)
        node = next((t.grad_fn for t in found if t.grad_fn is not None), None)   # one for all outputs
        try:
            state["pending"] = _cg_weakref.ref(node) if node is not None else None
        except TypeError:   # a node of eager ops: nothing was replayed
            state["pending"] = None
        state["done"] = state["pending"] is None
        if state["pending"] is not None:
            node.register_hook(lambda *grads: state.update(done=True))
        if clone_outputs:
            found = [t.clone() for t in found]
        return positional.build(iter(found))

    module.forward = _CgForward(forward, module)
    return module


def _cg_children(model):
    """cg-advise: the top-level submodules the submodule scope graphs; none for what is not a
    module (a name the rewrite took for a model: a namedtuple type, a function), left as it is."""
    return model.children() if isinstance(model, torch.nn.Module) else ()

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
ntokens, bptt, bsz, lr, clip = 100, 16, 8, 5.0, 0.25


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(ntokens, 32)
        self.rnn = nn.LSTM(32, 64)
        self.decoder = nn.Linear(64, ntokens)

    def forward(self, data, hidden):
        output, hidden = self.rnn(self.encoder(data), hidden)
        return self.decoder(output).view(-1, ntokens), hidden

    def init_hidden(self, batch):
        weight = next(self.parameters())
        return (weight.new_zeros(1, batch, 64), weight.new_zeros(1, batch, 64))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


class MLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Embedding(ntokens, 32), nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, ntokens))

    def forward(self, data):
        return self.net(data).view(-1, ntokens)


kind = os.environ.get("CG_MODEL", "LSTM")
model = (RNNModel() if kind == "LSTM" else MLPModel()).to(device)
criterion = nn.NLLLoss()
train_data = torch.randint(0, ntokens, (int(os.environ.get("CG_STEPS", "200")) * bptt + 1, bsz), device=device)


def train():
    model.train()
    total_loss = 0.0
    if kind != "MLP":
        hidden = model.init_hidden(bsz)
    for _cg_child in _cg_children(model):  # cg-advise: each top-level submodule as CUDA graphs
        if any(p.requires_grad for p in _cg_child.parameters()):
            _cg_graph_forward(_cg_child)

    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        if kind == "MLP":
            output = model(data)
        else:
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
        loss = criterion(torch.log_softmax(output, dim=-1), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % 50 == 49:
            print(f"batch {batch + 1} loss {total_loss / 50:.5f}")
            total_loss = 0.0
    return loss


print(f"final loss {train().item():.6f}")
