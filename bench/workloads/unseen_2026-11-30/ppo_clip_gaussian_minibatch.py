"""A PPO-style update for a continuous-action actor-critic (shared-trunk MLP with a Gaussian mean head, a state-independent log-std and a value head): for each "rollout", old log-probs, values and normalised advantages are recomputed under no_grad for a fixed synthetic buffer on the device, then 4 minibatch optimizer steps (a device randperm split in 4) with the clipped surrogate (torch.clamp(ratio, 1 - eps, 1 + eps)), a value loss and an entropy bonus, clip_grad_norm_(0.5), Adam. steps // 4 rollouts (one shorter rollout for a remainder), CG_STEPS optimizer steps in all."""
import math
import os

import torch
from torch import nn
from torch.distributions import Normal


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=64):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.mu = nn.Linear(hidden, act_dim)
        self.log_std = nn.Parameter(torch.full((act_dim,), -0.5))
        self.v = nn.Linear(hidden, 1)

    def forward(self, obs):
        h = self.trunk(obs)
        return Normal(self.mu(h), self.log_std.exp()), self.v(h).squeeze(-1)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
obs_dim, act_dim, buffer_size, n_minibatches = 17, 6, 2048, 4
clip_eps, vf_coef, ent_coef = 0.2, 0.5, 0.01
obs = torch.randn(buffer_size, obs_dim, device=device)
actions = torch.randn(buffer_size, act_dim, device=device).clamp(-2, 2)
returns = obs[:, :3].sum(1) - 0.1 * actions.pow(2).sum(1)

ac = ActorCritic(obs_dim, act_dim).to(device)
optimizer = torch.optim.Adam(ac.parameters(), lr=3e-4, eps=1e-5)
mb_size = buffer_size // n_minibatches

update = 0
for rollout in range(math.ceil(steps / n_minibatches)):
    with torch.no_grad():
        dist, values = ac(obs)
        old_logp = dist.log_prob(actions).sum(-1)
        adv = returns - values
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    perm = torch.randperm(buffer_size, device=device)
    for k in range(min(n_minibatches, steps - update)):
        idx = perm[k * mb_size:(k + 1) * mb_size]
        dist, value = ac(obs[idx])
        ratio = torch.exp(dist.log_prob(actions[idx]).sum(-1) - old_logp[idx])
        surr1 = ratio * adv[idx]
        surr2 = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv[idx]
        policy_loss = -torch.min(surr1, surr2).mean()
        value_loss = (returns[idx] - value).pow(2).mean()
        entropy = dist.entropy().sum(-1).mean()
        loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
        optimizer.step()
        update += 1
    if rollout % 10 == 0:
        print(f"rollout {rollout} policy loss {policy_loss.item():.4f} value loss {value_loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
