# categorical VAE (Gumbel-softmax) whose module anneals its temperature inside forward(), as in public gumbel-vae code
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class GumbelVAE(nn.Module):
    def __init__(self, n_latent=8, n_cat=10, tau0=1.0, anneal_rate=3e-3, tau_min=0.5):
        super().__init__()
        self.n_latent, self.n_cat = n_latent, n_cat
        self.encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, n_latent * n_cat))
        self.decoder = nn.Sequential(nn.Linear(n_latent * n_cat, 128), nn.ReLU(), nn.Linear(128, 64))
        self.tau, self.tau0, self.anneal_rate, self.tau_min = tau0, tau0, anneal_rate, tau_min
        self.num_updates = 0

    def forward(self, x):
        if self.training:
            # temperature schedule kept by the module itself
            self.num_updates += 1
            self.tau = max(self.tau_min, self.tau0 * math.exp(-self.anneal_rate * self.num_updates))
        logits = self.encoder(x).view(-1, self.n_latent, self.n_cat)
        z = F.gumbel_softmax(logits, tau=self.tau, hard=False)
        recon = self.decoder(z.flatten(1))
        q = F.softmax(logits, dim=-1)
        kl = (q * (torch.log(q + 1e-10) + math.log(self.n_cat))).sum(dim=(1, 2)).mean()
        return recon, kl


model = GumbelVAE().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.rand(30, 64, 64, device=device)

for epoch in range(4):
    model.train()
    epoch_loss = torch.zeros((), device=device)
    for batch in data:
        recon, kl = model(batch)
        loss = F.binary_cross_entropy_with_logits(recon, batch, reduction="sum") / batch.size(0) + kl
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.detach()
    print(f"epoch {epoch} loss {epoch_loss.item() / len(data):.3f} tau {model.tau:.4f} updates {model.num_updates}")
print("final loss", round(loss.item(), 3), "tau", round(model.tau, 4))
