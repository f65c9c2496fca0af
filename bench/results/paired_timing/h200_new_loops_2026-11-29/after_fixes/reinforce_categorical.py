"""A REINFORCE policy-gradient update on batched synthetic rollouts: a policy MLP's logits into torch.distributions.Categorical, sampled actions, rewards gathered from a fixed table, normalised advantages, an entropy bonus, RMSprop."""
import os

import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
obs_dim, n_actions, batch_size, entropy_coef = 16, 6, 256, 0.01
states = torch.randn(steps, batch_size, obs_dim, device=device)
reward_table = torch.randn(steps, batch_size, n_actions, device=device)
policy = nn.Sequential(nn.Linear(obs_dim, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, n_actions)).to(device)
optimizer = torch.optim.RMSprop(policy.parameters(), lr=7e-4, alpha=0.99, eps=1e-5)

for step in range(steps):
    dist = Categorical(logits=policy(states[step]))
    actions = dist.sample()
    returns = reward_table[step].gather(1, actions.unsqueeze(1)).squeeze(1)
    advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
    loss = -(dist.log_prob(actions) * advantages).mean() - entropy_coef * dist.entropy().mean()
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
    optimizer.step()
    if step % 40 == 0:
        print(f"update {step} loss {loss.item():.4f} mean return {returns.mean().item():.4f}")

print(f"final loss {loss.item():.6f}")
