"""The reinforcement-learning example's actor-critic loop on a toy environment: the policy is
called once per environment step with grad, an episode lasts a varying number of steps, and
one backward and optimizer step follow each episode."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
episodes = int(os.environ.get("CG_STEPS", "60"))


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 64), nn.ReLU())
        self.action_head = nn.Linear(64, 2)
        self.value_head = nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return torch.softmax(self.action_head(h), dim=-1), self.value_head(h)


class ToyEnv:
    """A pole that falls unless pushed the right way: the episode ends after 5-40 steps."""
    def reset(self):
        self.t, self.state = 0, torch.randn(4)
        return self.state

    def step(self, action):
        self.t += 1
        self.state = self.state * 0.9 + torch.randn(4) * 0.1 + (0.05 if action else -0.05)
        done = self.t >= 40 or (self.t >= 5 and abs(float(self.state[0])) > 1.0)
        return self.state, 1.0, done


model = Policy().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
env, gamma = ToyEnv(), 0.99

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for episode in range(episodes):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    state, saved, rewards, done = env.reset(), [], [], False
    while not done:
        probs, value = _cg_compiled_model(state.to(device).unsqueeze(0))
        m = torch.distributions.Categorical(probs)
        action = m.sample()
        saved.append((m.log_prob(action), value.squeeze()))
        state, reward, done = env.step(action.item())
        rewards.append(reward)
    returns, R = [], 0.0
    for r in reversed(rewards):
        R = r + gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns, device=device)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    policy_losses = [-log_prob * (R - value.item()) for (log_prob, value), R in zip(saved, returns)]
    value_losses = [nn.functional.smooth_l1_loss(value, R) for (_, value), R in zip(saved, returns)]
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    if episode % 20 == 0:
        print(f"episode {episode} length {len(rewards)} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
