import argparse

import torch
from torch import nn
import collections.abc
import contextlib
import warnings as _cg_warnings


def _cg_mode_layers(models):
    """cg-advise: the BatchNorm and dropout layers of ``models``: their mode changes what they
    compute (not every submodule's)."""
    return [m for model in models for m in model.modules()
            if isinstance(m, (torch.nn.modules.batchnorm._NormBase, torch.nn.modules.dropout._DropoutNd))]


def _cg_layer_modes(layers):
    """cg-advise: what a capture holds of each of ``layers`` as a constant: its mode, and a
    dropout layer's p or a BatchNorm layer's momentum, where a script changes them between epochs."""
    return [(m.training, getattr(m, "p", None), getattr(m, "momentum", None)) for m in layers]


def _cg_same_values(captured, now):
    """cg-advise: whether the globals a step reads still hold what its capture read: numbers
    and strings equal, anything else (a tensor bound anew) the very same object."""
    return len(captured) == len(now) and all(
        a is b or (type(a) is type(b) and isinstance(a, (bool, int, float, complex, str)) and a == b)
        for a, b in zip(captured, now))


class _CgFullIterationGraph:
    """cg-advise: the training step (forward, loss, backward and, unless they must stay eager,
    the optimizer steps) is captured in one CUDA graph on the first call and replayed after.
    Inputs (tensors, or tuples, lists and dicts of them) are copied into static buffers; a
    batch of another shape runs the step eagerly, and so does every step of a model that is
    not on a CUDA device (a script's CPU fallback runs as it did).
    Warm-up runs real steps on a side stream; afterwards the models and the optimizer state
    are put back in place, so training starts from the same point as without the graph."""

    def __init__(self, step, optimizers, models=(), warmup=3, clone_outputs=False, accumulate=False, allreduce=None,
                 optimizers_in_graph=True, changed_inputs=(), state=(), watched=None):
        self.step, self.optimizers, self.warmup = step, list(optimizers), warmup
        # the values the step reads from the script's globals that the script binds anew (a
        # learning rate divided by 4 between epochs, for a hand-written update): a graph holds
        # what its capture read, so a change is captured again
        self.watched = watched
        # tensors outside the models that the step changes in place (a memory bank, a running
        # statistic): the warm-up's steps change them too, so they are put back with the models
        self.state = self._flatten(list(state))[0]
        # the positions of the inputs the step changes in place (x.mul_(0.5)): a replay changes
        # the graph's copies, which go back into the caller's tensors, as eager would have changed them
        self.changed_inputs = tuple(changed_inputs)
        # False: the optimizers step eagerly after each replay (a GradScaler, a scheduler, micro-steps)
        # and are left as they are: made capturable, an eager Adam step launches more kernels
        self.optimizers_in_graph = optimizers_in_graph
        self.models = [m for m in models if isinstance(m, torch.nn.Module)]
        self.clone_outputs = clone_outputs  # the loop keeps outputs past the next replay, which overwrites them
        # micro-steps: each replay's backward adds into the gradients, which the script zeroes
        # (or sets to None) after its optimizer step, outside the graph
        self.accumulate = accumulate
        # a DistributedDataParallel model whose all-reduce stays out of the graph: the step is
        # captured under its no_sync(), and each replay's gradients are averaged over the ranks here
        self.allreduce = allreduce
        self.graph = None
        self.replays = 0       # since the last capture
        self.unlike = 0        # calls in a row whose inputs are not laid out as the capture's
        self.quick = 0         # settings changed within a few replays of the capture before, in a row
        self.eager = False     # the optimizers' settings change every few steps: no graph pays off
        self.trained = None    # at the capture: which parameters required grad (None: not captured yet)

    def _zero_grad(self, set_to_none=True):
        for owner in self.optimizers + self.models:   # models too: a hand-written update has no optimizer
            owner.zero_grad(set_to_none=set_to_none)

    def __call__(self, *inputs):
        tensors, layout = self._flatten(inputs)
        if self.graph is not None and [p.requires_grad for p in self.captured_params] != self.trained:
            # parameters frozen or unfrozen since the capture (a backbone trained after the head):
            # the graph's backward and optimizer step hold the old set; captured again, warmed up
            # as the first time, so that the optimizer state the newly trained ones need is made
            self.graph = None
        if self.graph is not None and [p.data_ptr() for p in self.anchors] != self.placed:
            # the models moved off the GPU and back since the capture (model.cpu() to save a
            # checkpoint, then .to(device)): their parameters hold new storage, the graph the old
            self.graph = None
        if self.graph is not None and _cg_layer_modes(self.mode_modules) != self.modes:
            # a model put in eval or train mode since the capture (model.eval() for validation,
            # never set back; its BatchNorm layers frozen after a warm-up), or a layer's setting
            # changed (dropout's p annealed, BatchNorm's momentum decayed): the graph holds the
            # capture's, captured again as it is
            self.graph = None
        read = self.watched() if self.watched is not None else ()
        if self.graph is not None and (self.optimizers_in_graph and not self._same_settings()
                                       or not _cg_same_values(self.watched_values, read)):
            self._settings_changed()
        if self.eager or (self.graph is None and not self._on_cuda(tensors)):   # once captured, the model is on the GPU
            return self._eager_step(inputs)
        if self.graph is None and self.changed_inputs and self._changed_share_memory(inputs, tensors):
            # an input changed in place shares memory with another (an autoencoder's step(x, x)):
            # eager's change reaches both, a graph's copies are apart
            return self._eager_step(inputs, "changes in place an input that shares memory with another input")
        if self.graph is None and any(t.is_leaf and t.requires_grad for t in tensors):
            # an input made to require grad (FGSM's images.requires_grad_(True)): the graph's copy
            # is detached, so the step would find no gradient on it, and the caller's get none
            return self._eager_step(inputs, "is handed a tensor that requires grad")
        if self.graph is None:
            # a capture again (the optimizers' settings changed) finds everything warmed up and
            # the state made: no warm-up, and no copy of the state (twice the parameters for Adam)
            # first: no capture yet, or parameters frozen, unfrozen or added (a param group) since
            params = self._params()
            flags = [p.requires_grad for p in params]   # as the step is called, before its own changes
            first = (self.trained is None or flags != self.trained
                     or list(map(id, params)) != list(map(id, self.captured_params)))
            self.layout = layout
            self.static_tensors = [t.detach().clone() for t in tensors]
            self.static_inputs = self._unflatten(layout, iter(self.static_tensors))
            if first and self.optimizers_in_graph:
                self._make_capturable()
            groups = self._group_values()
            # the models and their layers whose mode changes what they compute (checked at every
            # call), in the modes the step is called in, before its own model.train() or model.eval()
            self.mode_modules = self.models + _cg_mode_layers(self.models)
            modes = _cg_layer_modes(self.mode_modules)
            if first:
                saved = self._snapshot()
                every_mode = [(m, m.training) for model in self.models for m in model.modules()]
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side), self._no_sync():
                    for _ in range(self.warmup):
                        self._zero_grad()
                        self.step(*self.static_inputs)
                torch.cuda.current_stream().wait_stream(side)
                for m, training in every_mode:   # a step that ends in model.eval(): captured as it is called
                    m.training = training
            self.graph = torch.cuda.CUDAGraph()
            self._zero_grad()
            if self.accumulate:   # gradients that exist make the captured backward add into them
                self.grads = [(p, torch.zeros_like(p)) for p in self._params() if p.requires_grad]
                for p, grad in self.grads:
                    p.grad = grad
            # under a process group NCCL's watchdog thread queries events during the capture,
            # which a global-mode capture takes as an error: only this thread's calls must not
            distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
            mode = "thread_local" if distributed else "global"
            with self._no_sync(), torch.cuda.graph(self.graph, capture_error_mode=mode):
                self.static_outputs = self.step(*self.static_inputs)
            self.output_tensors, self.output_layout = self._flatten(self.static_outputs)
            # the gradient tensors the captured backward made and writes into at every replay
            self.graph_grads = [(p, p.grad) for p in params if p.grad is not None]
            if first:
                self._restore(saved)
            for group, values in groups:   # a group's own Python counters the warm-up and capture moved
                group.update(values)
            self.settings, self.replays = self._settings(), 0
            self.captured_params, self.trained = params, flags
            # the tensors the graph reads and writes in place of the models: a move of a module
            # gives each new storage, not all of them at new addresses (the allocator hands some
            # freed blocks back), so every one is read at each call
            self.anchors = params + [b for m in self.models for b in m.buffers()]
            self.placed = [p.data_ptr() for p in self.anchors]
            self.modes = modes
            self.watched_values = read
            self.host_settings = [(value, float(value)) for group, values in groups for value in values.values()
                                  if torch.is_tensor(value) and value.device.type == "cpu" and value.numel() == 1]
            self._check_outputs(self.output_layout)
            copied = set(map(id, self.static_tensors))
            if any(id(t) not in copied for t in self._flatten(self.static_inputs)[0]):
                # the step put other tensors into its inputs (batch["x"] = ...): the graph reads
                # those, which no copy of the next batch reaches, and the caller's never get them
                self.graph = None
                return self._eager_step(inputs, "puts other tensors into its inputs (batch[0] = ...)")
            if any(t.requires_grad for t in self.static_tensors):
                # the step made its copy of an input require grad (x.requires_grad_()): the next
                # copy into it would fail, and its gradient would be the graph's, not the caller's
                self.graph = None
                return self._eager_step(inputs, "makes an input require grad")
            # a replay has the capture's layout: where the changed inputs lie, and which tensors
            # are the graph's own outputs (state the loop carries), are found once
            self.changed_spans = self._changed_spans(inputs)
            self.output_ids = set(map(id, self.output_tensors))
        try:
            same = layout == self.layout
        except Exception:  # a non-tensor value that cannot be compared
            same = False
        if self.accumulate:
            self._attach_grads()
        if not same:
            self.unlike += 1
            if self.unlike == 20:
                # a step handed another Python value at each call (a step counter, a length) or a
                # batch of ever another shape: no replay, and so no speedup, said once
                _cg_warnings.warn("cg-advise: the training step's inputs have differed from those it was captured "
                                  "with for 20 calls in a row (another shape, or another Python value such as a "
                                  "counter); such calls run eagerly", stacklevel=2)
            if not self.accumulate:
                self._zero_grad(set_to_none=False)  # keep the graph's gradient buffers
            return self.step(*inputs)
        for static, t in zip(self.static_tensors, tensors):
            static.copy_(t)
        self.graph.replay()
        self.replays, self.unlike = self.replays + 1, 0
        if self.changed_inputs:
            with torch.no_grad():
                for start, end in self.changed_spans:
                    for t, static in zip(tensors[start:end], self.static_tensors[start:end]):
                        if id(t) not in self.output_ids:   # state the loop carries is the graph's output: new already
                            t.copy_(static)
        if not self.accumulate:
            self._reattach_grads()
        if self.allreduce is not None:
            self._average_gradients()
        if self.clone_outputs:
            return self._unflatten(self.output_layout, iter([t.detach().clone() for t in self.output_tensors]))
        return self.static_outputs

    def _eager_step(self, inputs, why=None):
        # the step as the script ran it: the rewrite took its zero_grad into the helper (unless it
        # accumulates); with a reason, every later step too, said once
        if why is not None:
            self.eager = True
            _cg_warnings.warn(f"cg-advise: the training step {why}; it runs eagerly", stacklevel=3)
        if not self.accumulate:
            self._zero_grad()
        return self.step(*inputs)

    def _changed_share_memory(self, inputs, tensors):
        changed = {k for start, end in self._changed_spans(inputs) for k in range(start, end)}
        storages = [t.untyped_storage().data_ptr() for t in tensors]
        return any(storages[k] == storages[j] for k in changed for j in range(len(tensors)) if j != k)

    def _changed_spans(self, inputs):
        # where the tensors of each changed input lie among the flattened inputs
        spans, start = [], 0
        for k, value in enumerate(inputs):
            end = start + len(self._flatten(value)[0])
            if k in self.changed_inputs:
                spans.append((start, end))
            start = end
        return spans

    def _group_values(self):
        return [(group, {key: value for key, value in group.items() if key != "params"})
                for optimizer in self.optimizers for group in optimizer.param_groups]

    def _settings(self):
        # what the captured optimizer steps hold as constants: each param group's entries (a
        # learning rate set by a scheduler or by hand), the same objects while nothing changed,
        # so that comparing them reads no tensor
        return [tuple(group.items()) for optimizer in self.optimizers for group in optimizer.param_groups]

    def _same_settings(self):
        try:
            same = self._settings() == self.settings
        except Exception:  # a setting replaced by a tensor whose comparison is no single bool
            same = False
        # a CPU tensor setting (an lr a scheduler fills in place) is read at capture: by value
        return same and all(float(tensor) == value for tensor, value in self.host_settings)

    def _settings_changed(self):
        # a scheduler stepped between epochs (or a learning rate set by hand) since the capture:
        # captured again with the new values. Changed again and again within a few replays of
        # each capture (set every few steps, outside the loop), captured each time would be
        # slower than eager: those steps run eagerly from then on
        self.quick = self.quick + 1 if self.replays < 10 else 0
        if self.quick >= 2:
            self.eager = True
            _cg_warnings.warn("cg-advise: the optimizer's settings (learning rate, ...) or the script's values "
                              "the step reads change every few steps; the training step runs eagerly from here on",
                              stacklevel=3)
        self.graph = None

    def _no_sync(self):
        return self.allreduce.no_sync() if self.allreduce is not None else contextlib.nullcontext()

    def _average_gradients(self):
        # what DDP's hooks would have done in the backward: the mean of every rank's gradients
        # (of the wrapped module's parameters only, as DDP), and, as DDP's forward does with
        # broadcast_buffers, rank 0's buffers (BatchNorm statistics) for the next replay
        ddp = self.allreduce
        group = ddp.process_group
        grads = [p.grad for p in ddp.module.parameters() if p.requires_grad and p.grad is not None]
        flat = torch._utils._flatten_dense_tensors(grads)
        torch.distributed.all_reduce(flat, group=group)
        flat /= torch.distributed.get_world_size(group)
        for grad, mean in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
            grad.copy_(mean)
        if getattr(ddp, "broadcast_buffers", False):
            for buffer in ddp.module.buffers():
                torch.distributed.broadcast(buffer, 0, group=group)

    def _params(self):
        params = ([p for optimizer in self.optimizers for group in optimizer.param_groups for p in group["params"]]
                  + [p for model in self.models for p in model.parameters()])
        return list({id(p): p for p in params}.values())

    def _attach_grads(self):
        # the graph adds into its own gradient tensors: after the script's zero_grad (None, or
        # another tensor) they start again from zero, or from what the script left there
        for p, grad in self.grads:
            if p.grad is None:
                grad.zero_()
            elif p.grad is not grad:
                grad.copy_(p.grad)
            p.grad = grad

    def _reattach_grads(self):
        # a script that sets the gradients to None outside the step (a skipped step's
        # zero_grad(set_to_none=True) after a non-finite norm) cut them off from the graph's:
        # without this, every later step would find no gradient and train nothing
        for p, grad in self.graph_grads:
            if p.grad is not grad:
                p.grad = grad

    def _states(self):
        return [state for optimizer in self.optimizers for state in optimizer.state.values()]

    @staticmethod
    def _flatten(value):
        """(tensors, layout): the tensors of a batch (tensors, tuples, lists, dicts), and its
        structure with their shapes; other values are part of the layout, so a batch of another
        shape or with another such value runs the step eagerly."""
        if torch.is_tensor(value):
            return [value], ("tensor", tuple(value.shape), value.dtype, value.device)
        if isinstance(value, (tuple, list, collections.abc.Mapping)):
            mapping = isinstance(value, collections.abc.Mapping)
            tensors, layouts = [], []
            for item in (value.values() if mapping else value):
                found, layout = _CgFullIterationGraph._flatten(item)
                tensors += found
                layouts.append(layout)
            return tensors, (type(value), tuple(value.keys()) if mapping else None, tuple(layouts))
        return [], ("value", value)

    def _on_cuda(self, tensors):
        return any(t.is_cuda for t in self._params() + tensors)

    @staticmethod
    def _check_outputs(layout):
        """A value the step hands back must be a tensor (or a structure of them) that each
        replay rewrites in place; a float or another object would keep its capture-time value."""
        if layout[0] == "value":
            if layout[1] is not None and not isinstance(layout[1], (bool, int, str)):
                raise TypeError(f"cg-advise: the captured step returns a {type(layout[1]).__name__}, which a "
                                "CUDA graph cannot update on replay; compute it after the step")
        elif layout[0] != "tensor":
            for item in layout[2]:
                _CgFullIterationGraph._check_outputs(item)

    @staticmethod
    def _unflatten(layout, tensors):
        if layout[0] == "tensor":
            return next(tensors)
        if layout[0] == "value":
            return layout[1]
        kind, keys, layouts = layout
        items = [_CgFullIterationGraph._unflatten(item, tensors) for item in layouts]
        if keys is not None:
            return kind(dict(zip(keys, items)))
        return kind(*items) if hasattr(kind, "_fields") else kind(items)  # a namedtuple takes fields

    def _make_capturable(self):
        # an optimizer the patch could not rewrite (built by a caller, or outside the Adam
        # family) must still step inside the graph: capturable, its step counts on the GPU
        for optimizer in self.optimizers:
            for group in optimizer.param_groups:
                if group.get("capturable") is False:
                    group["capturable"] = True
                    for p in group["params"]:
                        state = optimizer.state.get(p, {})
                        for key in ("step", "mu_product"):   # NAdam keeps mu_product beside its step
                            if torch.is_tensor(state.get(key)):
                                state[key] = state[key].to(p.device)

    def _snapshot(self):
        # the models' parameters and buffers, the optimized parameters, and the optimizer state
        # that exists already (each tensor once)
        # buffers() too: a buffer registered with persistent=False (a running normalizer's count)
        # is not in the state_dict, and the warm-up's steps update it all the same
        tensors = [t for m in self.models for t in [*m.state_dict().values(), *m.buffers()]] + self._params() + self.state
        tensors += [v for state in self._states() for v in state.values() if torch.is_tensor(v)]
        unique = {id(t): t for t in tensors}
        return [(t, t.detach().clone()) for t in unique.values()]

    # the state torch.optim makes at a first step that does not start at zero; the rest starts
    # there (SGD's momentum buffer is the first gradient itself, which a zero buffer gives too
    # unless the script set dampening)
    _FIRST_VALUES = {("NAdam", "mu_product"): 1.0, ("ASGD", "mu"): 1.0, ("ASGD", "eta"): "lr", ("Rprop", "step_size"): "lr"}

    @torch.no_grad()
    def _restore(self, saved):
        # in place, since the graph holds these very tensors; state made by the warm-up starts
        # where the optimizer's first step starts it (a NAdam's mu_product left at zero would
        # zero its bias correction), what existed before goes back to its saved value
        for optimizer in self.optimizers:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    for key, value in optimizer.state.get(p, {}).items():
                        if torch.is_tensor(value):
                            first = self._first_value(optimizer, group, key)
                            value.fill_(complex(first, first) if value.is_complex() else first)
        for tensor, kept in saved:
            tensor.copy_(kept)

    def _first_value(self, optimizer, group, key):
        inner = getattr(optimizer, "optimizer", optimizer)   # a wrapper's (accelerate's) optimizer
        for (name, state_key), value in self._FIRST_VALUES.items():
            if key == state_key and isinstance(inner, getattr(torch.optim, name, ())):
                lr = group["lr"]
                return (float(lr) if torch.is_tensor(lr) else lr) if value == "lr" else value
        return 0.0

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    model = nn.Linear(8, 8).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 8, device="cuda")

    def _cg_step():
        """One training iteration, captured whole by cg-advise (scope full_iteration)."""
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()

    _cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [model])

    for i in range(args.steps):
        _cg_step_graph()
