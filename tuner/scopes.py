"""Capture scopes applied to one training step, and their untraced timing on the GPU.

A step is (model, loss_fn, optimizer, batches). Each scope returns a ``step(i)`` callable
that runs one training iteration on batch ``i``:

- eager: the baseline;
- submodule: ``make_graphed_callables`` on each top-level child that runs in the forward;
- fwd_bwd: ``make_graphed_callables`` on the whole model (forward and backward graphs);
- full_iteration: forward, loss, backward and optimizer step in one ``torch.cuda.graph``
  (the optimizer must be capturable), fed through static input buffers;
- compile: ``torch.compile(mode="reduce-overhead")``, the reference.
"""

from __future__ import annotations

import statistics

import torch

SCOPES = ("eager", "submodule", "fwd_bwd", "full_iteration", "compile")


def make_optimizer(kind: str, params, capturable: bool):
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, capturable=capturable, foreach=True)
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)


def called_children(model, x):
    """The top-level children the forward calls, in call order, with their inputs."""
    calls = []
    handles = [child.register_forward_pre_hook(lambda m, args, name=name: calls.append((name, m, args)))
               for name, child in model.named_children()]
    try:
        model(x)  # with grad: the recorded inputs carry the requires_grad of the real loop
    finally:
        for handle in handles:
            handle.remove()
    seen, ordered = set(), []
    for name, module, args in calls:
        if name not in seen and any(p.requires_grad for p in module.parameters()):
            seen.add(name)
            ordered.append((name, module, tuple(a.detach().clone().requires_grad_(a.requires_grad)
                                                if torch.is_tensor(a) else a for a in args)))
    return ordered


def build_step(scope: str, model, loss_fn, optimizer_kind: str, batches: list):
    """The step callable of one scope; captures happen here (warm-up on a side stream)."""
    x0, y0 = batches[0]
    if scope == "full_iteration":
        opt = make_optimizer(optimizer_kind, model.parameters(), capturable=True)
        static_x, static_y = x0.clone(), y0.clone()

        def body():
            loss = loss_fn(model(static_x), static_y)
            loss.backward()
            opt.step()
            return loss

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = body()

        def step(i):
            x, y = batches[i % len(batches)]
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            return static_loss

        return step

    opt = make_optimizer(optimizer_kind, model.parameters(), capturable=False)
    if scope == "submodule":
        children = called_children(model, x0)
        graphed = torch.cuda.make_graphed_callables(tuple(m for _, m, _ in children),
                                                    tuple(args for _, _, args in children))
        for (name, _, _), module in zip(children, graphed):
            setattr(model, name, module)
        runner = model
    elif scope == "fwd_bwd":
        runner = torch.cuda.make_graphed_callables(model, (x0.clone(),))
    elif scope == "compile":
        runner = torch.compile(model, mode="reduce-overhead")
    elif scope == "eager":
        runner = model
    else:
        raise ValueError(f"unknown scope {scope!r}")

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(runner(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def time_step(step, warmup: int = 10, steps: int = 20, repeats: int = 5) -> float:
    """Median over repeats of the mean ms per iteration, timed with CUDA events."""
    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    results = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(steps):
            step(i)
        end.record()
        torch.cuda.synchronize()
        results.append(start.elapsed_time(end) / steps)
    return statistics.median(results)
