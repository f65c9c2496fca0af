"""CleanRL's PPO update: the agent's own method builds the policy's Categorical (not the loop),
minibatches of a rollout buffer on the GPU, a clipped surrogate loss, a value loss, an entropy
bonus, gradient clipping and Adam."""
import os

import torch
from torch import nn
from torch.distributions.categorical import Categorical

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
obs_dim, n_actions, buffer, minibatch = 8, 4, 1024, 256
clip_coef, ent_coef, vf_coef, max_grad_norm = 0.2, 0.01, 0.5, 0.5


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, n_actions))

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


agent = Agent().to(device)
optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
b_obs = torch.randn(buffer, obs_dim, device=device)
with torch.no_grad():
    b_actions, b_logprobs, _, b_values = agent.get_action_and_value(b_obs)
b_returns = b_values.view(-1) + torch.randn(buffer, device=device)
b_advantages = b_returns - b_values.view(-1)
per_epoch = buffer // minibatch

for update in range(steps):
    if update % per_epoch == 0:
        order = torch.randperm(buffer, device=device)
    start = (update % per_epoch) * minibatch
    mb_inds = order[start:start + minibatch]
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
    ratio = (newlogprob - b_logprobs[mb_inds]).exp()
    mb_advantages = b_advantages[mb_inds]
    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
    pg_loss = torch.max(-mb_advantages * ratio, -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
    v_loss = 0.5 * ((newvalue.view(-1) - b_returns[mb_inds]) ** 2).mean()
    loss = pg_loss - ent_coef * entropy.mean() + v_loss * vf_coef
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
    optimizer.step()
    if update % 50 == 0:
        print(f"update {update} loss {loss.item():.4f} value loss {v_loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
