import torch
from torch import nn
import copy as _cg_copy
import types as _cg_types


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


def _cg_graph_inference(module, buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), warmup=3):
    """cg-advise: forward passes without grad replay a CUDA graph captured once per batch-size
    bucket: the batch (dim 0 of every input) is copied into static buffers of the next bucket
    size, the graph replays, and copies of the outputs' first rows come back. This assumes the
    rows of a batch do not interact (true of eval-mode models). Calls with grad, keyword
    arguments, non-CUDA inputs or a batch over the largest bucket run the eager forward."""
    eager_forward = module.forward
    graphs = {}
    pool = []

    def cut(out, n, size):
        if torch.is_tensor(out):
            return out[:n].clone() if out.dim() and out.shape[0] == size else out.clone()
        if isinstance(out, (tuple, list)):
            return type(out)(cut(o, n, size) for o in out)
        if isinstance(out, dict):
            return type(out)((k, cut(v, n, size)) for k, v in out.items())
        return out

    def forward(*inputs, **kwargs):
        if (kwargs or torch.is_grad_enabled() or not inputs or _cg_exporting()
                or not all(torch.is_tensor(t) and t.is_cuda and t.dim() for t in inputs)):
            return eager_forward(*inputs, **kwargs)
        n = inputs[0].shape[0]
        size = next((b for b in buckets if b >= n), None)
        if size is None or any(t.shape[0] != n for t in inputs):
            return eager_forward(*inputs)
        key = (size,) + tuple((tuple(t.shape[1:]), t.dtype) for t in inputs)
        if key not in graphs:
            static = [t.new_zeros((size, *t.shape[1:])) for t in inputs]
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(warmup):
                    eager_forward(*static)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool[0] if pool else None):
                out = eager_forward(*static)
            pool[:] = [graph.pool()]
            graphs[key] = (graph, static, out)
        graph, static, out = graphs[key]
        for buffer, t in zip(static, inputs):
            buffer[:n].copy_(t)
        graph.replay()
        return cut(out, n, size)

    module.forward = _CgForward(forward, module)
    return module

model = nn.Linear(8, 8).cuda().eval()
with torch.no_grad():
    _cg_graph_inference(model)  # cg-advise: forward passes as CUDA graphs, one per batch-size bucket

    for _ in range(200):
        model(torch.randn(4, 8, device="cuda"))
