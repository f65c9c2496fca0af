"""The PyTorch "Reinforcement Learning (DQN)" tutorial: a policy_net and a target_net (a copy),
a ReplayMemory (a deque of Transition namedtuples) filled by an environment (a small fake one,
its states and rewards drawn from a seeded torch generator), select_action() epsilon-greedy with
the greedy action under torch.no_grad(), and optimize_model(): return early while
len(memory) < BATCH_SIZE, sample a batch (seeded random.sample), a non_final_mask (the episode's
last transition has next_state None, so the target_net's input varies in size),
policy_net(state_batch).gather(1, action_batch), the next state values under no_grad from the
target_net, SmoothL1Loss, zero_grad/backward, clip_grad_value_(..., 100) and step (AdamW with
amsgrad=True); after each optimize_model() the target net is soft-updated through state dicts
(target_net.load_state_dict of policy*TAU + target*(1-TAU))."""
import math
import os
import random
from collections import deque, namedtuple
from itertools import count

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

torch.manual_seed(0)
random.seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
BATCH_SIZE, GAMMA, EPS_START, EPS_END, EPS_DECAY, TAU, LR = 16, 0.99, 0.9, 0.05, max(1, steps // 2), 0.005, 1e-4
EPISODE_LEN = 10
num_episodes = max(2, (steps + BATCH_SIZE) // EPISODE_LEN)
Transition = namedtuple("Transition", ("state", "action", "next_state", "reward"))


class FakeEnv:
    """CartPole-like: 4 observations, 2 actions, terminated after EPISODE_LEN steps."""

    def __init__(self):
        self.gen, self.n_actions = torch.Generator().manual_seed(0), 2

    def reset(self):
        self.t, self.state = 0, torch.randn(4, generator=self.gen) * 0.1
        return self.state.tolist(), {}

    def sample_action(self):
        return int(torch.randint(self.n_actions, (1,), generator=self.gen))

    def step(self, action):
        self.t += 1
        push = torch.tensor([0.1, 0.0, -0.1, 0.0]) * (2 * action - 1)
        self.state = self.state * 0.9 + push + torch.randn(4, generator=self.gen) * 0.05
        return self.state.tolist(), 1.0 - abs(self.state[2].item()), self.t >= EPISODE_LEN, False, {}


class ReplayMemory:
    def __init__(self, capacity):
        self.memory = deque([], maxlen=capacity)

    def push(self, *args):
        self.memory.append(Transition(*args))

    def sample(self, batch_size):
        return random.sample(self.memory, batch_size)

    def __len__(self):
        return len(self.memory)


class DQN(nn.Module):
    def __init__(self, n_observations, n_actions):
        super().__init__()
        self.layer1, self.layer2, self.layer3 = nn.Linear(n_observations, 64), nn.Linear(64, 64), nn.Linear(64, n_actions)

    def forward(self, x):
        return self.layer3(torch.relu(self.layer2(torch.relu(self.layer1(x)))))


env = FakeEnv()
state, info = env.reset()
policy_net = DQN(len(state), env.n_actions).to(device)
target_net = DQN(len(state), env.n_actions).to(device)
target_net.load_state_dict(policy_net.state_dict())
optimizer = torch.optim.AdamW(policy_net.parameters(), lr=LR, amsgrad=True)
memory = ReplayMemory(10000)
eps_gen = torch.Generator().manual_seed(1)
steps_done, last_loss, episode_durations = 0, None, []


def select_action(state):
    global steps_done
    sample = torch.rand(1, generator=eps_gen).item()
    eps_threshold = EPS_END + (EPS_START - EPS_END) * math.exp(-1.0 * steps_done / EPS_DECAY)
    steps_done += 1
    if sample > eps_threshold:
        with torch.no_grad():
            return policy_net(state).max(1).indices.view(1, 1)
    return torch.tensor([[env.sample_action()]], device=device, dtype=torch.long)


def optimize_model():
    global last_loss
    if len(memory) < BATCH_SIZE:
        return
    transitions = memory.sample(BATCH_SIZE)
    batch = Transition(*zip(*transitions))
    non_final_mask = torch.tensor(tuple(map(lambda s: s is not None, batch.next_state)), device=device, dtype=torch.bool)
    non_final_next_states = torch.cat([s for s in batch.next_state if s is not None])
    state_batch, action_batch, reward_batch = torch.cat(batch.state), torch.cat(batch.action), torch.cat(batch.reward)
    state_action_values = policy_net(state_batch).gather(1, action_batch)
    next_state_values = torch.zeros(BATCH_SIZE, device=device)
    with torch.no_grad():
        next_state_values[non_final_mask] = target_net(non_final_next_states).max(1).values
    expected_state_action_values = (next_state_values * GAMMA) + reward_batch
    criterion = nn.SmoothL1Loss()
    loss = criterion(state_action_values, expected_state_action_values.unsqueeze(1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_value_(policy_net.parameters(), 100)
    optimizer.step()
    last_loss = loss


_cg_graph_forward(policy_net, accumulate=True)  # cg-advise: forward and backward as CUDA graphs

for i_episode in range(num_episodes):
    state, info = env.reset()
    state = torch.tensor(state, dtype=torch.float32, device=device).unsqueeze(0)
    for t in count():
        action = select_action(state)
        observation, reward, terminated, truncated, _ = env.step(action.item())
        reward = torch.tensor([reward], device=device)
        done = terminated or truncated
        next_state = None if terminated else torch.tensor(observation, dtype=torch.float32, device=device).unsqueeze(0)
        memory.push(state, action, next_state, reward)
        state = next_state
        optimize_model()
        target_net_state_dict, policy_net_state_dict = target_net.state_dict(), policy_net.state_dict()
        for key in policy_net_state_dict:
            target_net_state_dict[key] = policy_net_state_dict[key] * TAU + target_net_state_dict[key] * (1 - TAU)
        target_net.load_state_dict(target_net_state_dict)
        if done:
            episode_durations.append(t + 1)
            if i_episode % 10 == 0:
                print(f"episode {i_episode}: duration {t + 1}, memory {len(memory)}")
            break
print(f"final loss {last_loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in policy_net.parameters()):.6f}")
