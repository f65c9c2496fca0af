# VAE with KL warm-up (Bowman et al. shape): the KL weight kept in a torch.tensor (made on the host) updated in place with fill_ each step
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(32, 64)
        self.mu = nn.Linear(64, 8)
        self.logvar = nn.Linear(64, 8)
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, x):
        h = F.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


model = VAE().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.randn(20, 64, 32, device=device)
kl_weight = torch.tensor(0.0)
warmup_steps = 40
global_step = 0
for epoch in range(3):
    for x in data:
        kl_weight.fill_(min(1.0, global_step / warmup_steps))
        recon, mu, logvar = model(x)
        rec = F.mse_loss(recon, x, reduction="sum") / x.shape[0]
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / x.shape[0]
        loss = rec + kl_weight * kld
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
    print(f"epoch {epoch} loss {loss.item():.4f} rec {rec.item():.4f} kld {kld.item():.4f} w {kl_weight.item():.3f}")
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 5), "steps", global_step)
