"""A VAE trained with KL annealing: the KL term's weight ramps up with the step count, a plain
Python number computed in the loop and read by the loss."""
import os

import torch
import torch.nn.functional as F
from torch import nn
import copy as _cg_copy
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

# an LSTM's (h, c) state given to the model: graphed where make_graphed_callables takes
# tuples and lists of tensors as arguments (it flattens them with arg_tree_leaves); eager before
_CG_NESTED_INPUTS = hasattr(_cg_pytree, "arg_tree_leaves")


def _cg_graph_forward(module, warmup=3, accumulate=False):
    """cg-advise: on the first call in training, capture `module`'s forward and backward as
    CUDA graphs (torch.cuda.make_graphed_callables) and replay them after; inputs of another
    shape, calls without grad and CPU inputs run the eager forward. With `accumulate` (several backward
    passes per optimizer step, or gradients zeroed in place) each gradient is copied out of the
    graph's static buffer, which the next replay overwrites. A call made while the backward of
    the last replay is still to come (a layer run in a loop, a model called twice in a step,
    even where its first output was reduced at once: D(fake).mean() - D(real).mean()) runs
    eagerly: a replay would overwrite what that backward reads. The last replay's autograd node
    tells: its hook marks the backward done, and it is freed with a loss dropped unused."""
    if not isinstance(module, torch.nn.Module) or not any(p.requires_grad for p in module.parameters()):
        return module  # a function, or a module with nothing to train (a loss): stays eager
    if isinstance(vars(module).get("forward"), _CgForward):
        return module  # set up already (a train() called once per epoch): never a graph of a graph
    eager_forward = module.forward
    hooked = set()   # accumulate: the parameters whose gradient hook is registered
    state = {}

    def _tensors(out):   # the output's tensors, in tuples, lists and dicts (as make_graphed_callables takes them)
        if torch.is_tensor(out):
            return [out]
        if isinstance(out, dict):
            out = list(out.values())
        return [t for o in out for t in _tensors(o)] if isinstance(out, (tuple, list)) else []

    def forward(*inputs, **kwargs):
        leaves, layout = _cg_pytree.tree_flatten(inputs)   # tensors, also in tuples and lists of them
        nested = len(leaves) != len(inputs) or not all(map(torch.is_tensor, inputs))
        if (kwargs or not torch.is_grad_enabled() or _cg_exporting() or (nested and not _CG_NESTED_INPUTS)
                or not all(torch.is_tensor(t) and t.is_cuda for t in leaves)):  # a CPU run stays eager
            return eager_forward(*inputs, **kwargs)
        shapes = [tuple(t.shape) for t in leaves]
        if state and (shapes != state["shapes"] or layout != state["layout"]):
            return eager_forward(*inputs)
        needed = [t.requires_grad for t in leaves]
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
                return eager_forward(*inputs)
            module.forward = eager_forward
            samples = _cg_pytree.tree_unflatten([t.detach().clone().requires_grad_(need)
                                                 for t, need in zip(leaves, needed)], layout)
            buffers = [(b, b.detach().clone()) for b in module.buffers()]
            torch.cuda.make_graphed_callables(module, samples, num_warmup_iters=warmup)
            with torch.no_grad():  # the warm-up ran forwards: put BatchNorm's running stats back
                for buffer, saved in buffers:
                    buffer.copy_(saved)
            trained = [p for p in module.parameters() if p.requires_grad]
            if accumulate:
                for p in trained:
                    if id(p) not in hooked:
                        p.register_hook(torch.clone)
                        hooked.add(id(p))
            state["graphed"], state["shapes"], state["needed"] = module.forward, shapes, needed
            state["layout"] = layout
            state["frozen"] = [p for p in module.parameters() if not p.requires_grad]
            module.forward = holder
        if not state.get("done", True) and state["pending"]() is not None:
            if not state.get("warned"):
                state["warned"] = True
                _cg_warnings.warn(f"cg-advise: {type(module).__name__} is called again before the backward of its "
                                  "last call (in a loop, twice in a step, or a step skipped with its loss kept); "
                                  "such calls run eagerly", stacklevel=2)
            return eager_forward(*inputs)
        output = state["graphed"](*inputs)
        node = next((t.grad_fn for t in _tensors(output) if t.grad_fn is not None), None)   # one for all outputs
        try:
            state["pending"] = _cg_weakref.ref(node) if node is not None else None
        except TypeError:
            # a node of eager ops: no replay (make_graphed_callables runs the module's own
            # forward where its training flag differs from the capture's: a model.eval() with grad)
            state["pending"] = None
        state["done"] = state["pending"] is None
        if state["pending"] is not None:
            node.register_hook(lambda *grads: state.update(done=True))
        return output

    module.forward = holder = _CgForward(forward, module)
    return module


def _cg_children(model):
    """cg-advise: the top-level submodules the submodule scope graphs; none for what is not a
    module (a name the rewrite took for a model: a namedtuple type, a function), left as it is."""
    return model.children() if isinstance(model, torch.nn.Module) else ()

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
warmup_steps = 100


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
        self.decoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64))

    def forward(self, x):
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decoder(z), mu, logvar


model = VAE().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [torch.rand(32, 64) for _ in range(steps)]

for _cg_child in _cg_children(model):  # cg-advise: each top-level submodule as CUDA graphs
    if any(p.requires_grad for p in _cg_child.parameters()):
        _cg_graph_forward(_cg_child)

for step, x in enumerate(data):
    x = x.to(device)
    beta = min(1.0, step / warmup_steps)
    recon, mu, logvar = model(x)
    kld = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    loss = F.mse_loss(recon, x) + beta * kld
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} beta {beta:.2f} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
