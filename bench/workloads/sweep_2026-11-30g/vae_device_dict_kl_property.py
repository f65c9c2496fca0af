# VAE Trainer with self.device: the loop moves a dict batch with {k: v.to(self.device)}, calls self.train_step(batch); KL weight is a property ramped from self.global_step
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class VAE(nn.Module):
    def __init__(self, d=48, z=8):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(d, 96), nn.SiLU(), nn.Linear(96, 2 * z))
        self.dec = nn.Sequential(nn.Linear(z, 96), nn.SiLU(), nn.Linear(96, d))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        zs = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(zs), mu, logvar


class VAETrainer:
    def __init__(self, model, optimizer, device, kl_warmup_steps=60):
        self.model = model
        self.optimizer = optimizer
        self.device = device
        self.kl_warmup_steps = kl_warmup_steps
        self.global_step = 0

    @property
    def kl_weight(self):
        return min(1.0, self.global_step / self.kl_warmup_steps)

    def train_step(self, batch):
        recon, mu, logvar = self.model(batch["x"])
        rec = F.mse_loss(recon, batch["x"], reduction="sum") / batch["x"].shape[0]
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / batch["x"].shape[0]
        loss = rec + self.kl_weight * kl
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            losses = []
            for batch in loader:
                batch = {k: v.to(self.device) for k, v in batch.items()}
                loss = self.train_step(batch)
                losses.append(loss)
                self.global_step += 1
            print(f"epoch {epoch} loss {torch.stack(losses).mean().item():.4f} kl_w {self.kl_weight:.3f}")
        return losses[-1]


data = torch.randn(25, 32, 48, device=device) @ torch.randn(48, 48, device=device) * 0.3
loader = [{"x": x} for x in data]
model = VAE().to(device)
trainer = VAETrainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), device)
last = trainer.fit(loader, epochs=4)

print(f"final loss {last.item():.4f}")
print("steps", trainer.global_step)
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
