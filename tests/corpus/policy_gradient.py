import os

import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
obs_dim, n_actions, batch_size = 16, 6, 256
states = torch.randn(batch_size, obs_dim, device=device)
reward_table = torch.randn(batch_size, n_actions, device=device)
policy = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, n_actions)).to(device)
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)

for step in range(steps):
    dist = Categorical(logits=policy(states))
    actions = dist.sample()
    returns = reward_table.gather(1, actions.unsqueeze(1)).squeeze(1)
    advantages = (returns - returns.mean()) / (returns.std() + 1e-8)
    loss = -(dist.log_prob(actions) * advantages).mean() - 0.01 * dist.entropy().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f} mean return {returns.mean().item():.4f}")

print(f"final loss {loss.item():.6f}")
