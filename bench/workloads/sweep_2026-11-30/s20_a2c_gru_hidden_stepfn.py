# Recurrent policy (A2C-style) update: hidden state carried across steps, reset in place by done masks
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class Policy(nn.Module):
    def __init__(self, obs=8, hid=32, act=4):
        super().__init__()
        self.cell = nn.GRUCell(obs, hid)
        self.pi = nn.Linear(hid, act)
        self.v = nn.Linear(hid, 1)

    def forward(self, obs, h):
        h = self.cell(obs, h)
        return self.pi(h), self.v(h).squeeze(-1), h


def update(policy, optimizer, obs, actions, returns, masks, hidden):
    hidden.mul_(masks.unsqueeze(1))          # episodes that ended start from zeros
    logits, values, hidden = policy(obs, hidden.detach())
    logp = F.log_softmax(logits, -1).gather(1, actions.unsqueeze(1)).squeeze(1)
    adv = returns - values
    loss = -(logp * adv.detach()).mean() + 0.5 * adv.pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
    optimizer.step()
    return loss, hidden


policy = Policy().to(device)
optimizer = torch.optim.RMSprop(policy.parameters(), lr=7e-4, eps=1e-5, alpha=0.99)
n_envs = 16
hidden = torch.zeros(n_envs, 32, device=device)
snapshots = []
for t in range(200):
    obs = torch.randn(n_envs, 8, device=device)
    actions = torch.randint(0, 4, (n_envs,), device=device)
    returns = torch.randn(n_envs, device=device)
    masks = (torch.rand(n_envs, device=device) > 0.05).float()
    loss, hidden = update(policy, optimizer, obs, actions, returns, masks, hidden)
    if t % 50 == 0:
        snapshots.append(hidden)
print("loss", loss.item(), "hidden", hidden.abs().mean().item())
print("snapshot norms", [round(s.norm().item(), 3) for s in snapshots])
