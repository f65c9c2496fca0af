# RL/tabular running input normalizer (RunningMeanStd-style) as an nn.Module with non-persistent buffers updated in place in forward
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class RunningNorm(nn.Module):
    def __init__(self, dim, eps=1e-4):
        super().__init__()
        # statistics are recomputed every run, so they are kept out of the checkpoint
        self.register_buffer("mean", torch.zeros(dim), persistent=False)
        self.register_buffer("var", torch.ones(dim), persistent=False)
        self.register_buffer("count", torch.tensor(eps), persistent=False)

    def forward(self, x):
        if self.training:
            with torch.no_grad():
                batch_mean, batch_var, n = x.mean(0), x.var(0, unbiased=False), x.shape[0]
                delta = batch_mean - self.mean
                total = self.count + n
                new_mean = self.mean + delta * n / total
                m2 = self.var * self.count + batch_var * n + delta.pow(2) * self.count * n / total
                self.mean.copy_(new_mean)
                self.var.copy_(m2 / total)
                self.count.add_(n)
        return (x - self.mean) / torch.sqrt(self.var + 1e-8)


class ValueNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = RunningNorm(8)
        self.body = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))

    def forward(self, obs):
        return self.body(self.norm(obs))


net = ValueNet().to(device)
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
obs = torch.randn(30, 64, 8, device=device) * 3 + 2
returns = obs[..., :2].sum(-1, keepdim=True) * 0.5

for epoch in range(3):
    for o, r in zip(obs, returns):
        value_loss = F.mse_loss(net(o), r)
        optimizer.zero_grad()
        value_loss.backward()
        optimizer.step()
    print(f"epoch {epoch} value loss {value_loss.item():.5f}")
print("obs count", round(net.norm.count.item()), "obs mean", round(net.norm.mean.sum().item(), 5))
print("param sum", round(sum(p.sum().item() for p in net.parameters()), 5))
