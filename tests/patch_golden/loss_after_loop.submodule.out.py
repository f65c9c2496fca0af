import os

import torch
from torch import nn
import copy as _cg_copy
import functools as _cg_functools
import warnings as _cg_warnings
import weakref as _cg_weakref


class _CgForward:
    """cg-advise: the forward a graphed module calls (its graphs, or its eager forward); to
    copy.deepcopy (a best model kept, an EMA copy made later) and to pickle (torch.save of the
    whole module) it is the module's own eager forward, so that a copy never replays the
    original's graphs and a saved module loads without cg-advise."""

    def __init__(self, run, module, eager):
        self.run, self.module, self.eager = run, module, eager

    def __call__(self, *inputs, **kwargs):
        return self.run(*inputs, **kwargs)

    def _own(self):
        return getattr(self.eager, "__func__", type(self.module).forward)

    def __reduce__(self):
        return _cg_functools.partial, (self._own(), self.module)

    def __deepcopy__(self, memo):
        return _cg_functools.partial(self._own(), _cg_copy.deepcopy(self.module, memo))


def _cg_exporting():
    # traced (torch.jit.trace, an ONNX export) or compiled (torch.compile, torch.export): the
    # eager forward, whose operations the trace must hold, not the graph's replay
    return torch.jit.is_tracing() or getattr(torch.compiler, "is_compiling", bool)()


def _cg_graph_forward(module, warmup=3, accumulate=False):
    """cg-advise: on the first call in training, capture `module`'s forward and backward as
    CUDA graphs (torch.cuda.make_graphed_callables) and replay them after; inputs of another
    shape, calls without grad and CPU inputs run the eager forward. With `accumulate` (several backward
    passes per optimizer step, or gradients zeroed in place) each gradient is copied out of the
    graph's static buffer, which the next replay overwrites. A module called again while the
    outputs of its last replay still await their backward (a layer run in a loop, used twice)
    runs eagerly from then on: a replay would overwrite what that backward reads. Outputs freed
    without a backward (a forward whose loss is skipped) leave nothing to overwrite."""
    if not isinstance(module, torch.nn.Module) or not any(p.requires_grad for p in module.parameters()):
        return module  # a function, or a module with nothing to train (a loss): stays eager
    if getattr(module, "_cg_graphed", False):
        return module  # set up already (a train() called once per epoch): never a graph of a graph
    module._cg_graphed = True
    eager_forward = module.forward
    params = list(module.parameters())
    hooked = set()   # accumulate: the parameters whose gradient hook is registered
    state = {}

    def _tensors(out):   # the output's tensors, in tuples, lists and dicts (as make_graphed_callables takes them)
        if torch.is_tensor(out):
            return [out]
        if isinstance(out, dict):
            out = list(out.values())
        return [t for o in out for t in _tensors(o)] if isinstance(out, (tuple, list)) else []

    def forward(*inputs, **kwargs):
        if (kwargs or not torch.is_grad_enabled() or _cg_exporting()
                or not all(torch.is_tensor(t) and t.is_cuda for t in inputs)):  # a CPU run stays eager
            return eager_forward(*inputs, **kwargs)
        trained = [p.requires_grad for p in params]
        if not any(trained):   # frozen whole (a backbone before its fine-tuning): nothing to graph
            return eager_forward(*inputs)
        trained += [t.requires_grad for t in inputs]
        if state and trained != state["trained"] and not state.get("again"):
            # parameters frozen or unfrozen since the capture, or an input that needs its gradient
            # now (the output of a layer before it, unfrozen): its backward graph computes the
            # gradients that were needed then; captured again for the ones needed now
            state.clear()
        shapes = [tuple(t.shape) for t in inputs]
        if state and shapes != state["shapes"]:
            return eager_forward(*inputs)
        if not state:
            module.forward = eager_forward
            samples = tuple(t.detach().clone().requires_grad_(t.requires_grad) for t in inputs)
            buffers = [(b, b.detach().clone()) for b in module.buffers()]
            torch.cuda.make_graphed_callables(module, samples, num_warmup_iters=warmup)
            with torch.no_grad():  # the warm-up ran forwards: put BatchNorm's running stats back
                for buffer, saved in buffers:
                    buffer.copy_(saved)
            if accumulate:
                for p in params:
                    if p.requires_grad and id(p) not in hooked:
                        p.register_hook(torch.clone)
                        hooked.add(id(p))
            state["graphed"], state["shapes"], state["trained"] = module.forward, shapes, trained
            module.forward = holder
        if state.get("again"):
            return eager_forward(*inputs)
        if not state.get("done", True) and any(alive() is not None for alive in state["alive"]):
            state["again"] = True
            _cg_warnings.warn(f"cg-advise: {type(module).__name__} is called again before the backward of its "
                              "last call (in a loop, or twice); it runs eagerly from now on", stacklevel=2)
            return eager_forward(*inputs)
        output = state["graphed"](*inputs)
        waited = [t for t in _tensors(output) if t.requires_grad]
        state["alive"], state["done"] = [_cg_weakref.ref(t) for t in waited], not waited
        for t in waited:
            t.register_hook(lambda grad: state.update(done=True))
        return output

    module.forward = holder = _CgForward(forward, module, eager_forward)
    return module

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(16, 32, device=device), torch.randn(16, 1, device=device)) for _ in range(steps)]

for _cg_child in model.children():  # cg-advise: each top-level submodule as CUDA graphs
    if any(p.requires_grad for p in _cg_child.parameters()):
        _cg_graph_forward(_cg_child)

for x, y in data:
    optimizer.zero_grad()
    prediction = model(x)
    loss = nn.functional.mse_loss(prediction, y)
    loss.backward()
    optimizer.step()

print(f"final loss {loss.item():.6f}")
print("final prediction mean", round(prediction.mean().item(), 6))
