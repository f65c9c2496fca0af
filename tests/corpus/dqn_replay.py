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
