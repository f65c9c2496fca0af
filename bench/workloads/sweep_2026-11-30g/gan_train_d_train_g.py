# GAN Trainer whose loop calls self.train_d(real) then self.train_g(batch_size), each method doing its own forward, BCE loss, backward and Adam step
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


class GANTrainer:
    def __init__(self, z_dim=16, x_dim=2):
        self.z_dim = z_dim
        self.G = nn.Sequential(nn.Linear(z_dim, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, x_dim)).to(device)
        self.D = nn.Sequential(nn.Linear(x_dim, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2),
                               nn.Linear(64, 1)).to(device)
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.bce = nn.BCEWithLogitsLoss()

    def train_d(self, real):
        z = torch.randn(real.size(0), self.z_dim, device=device)
        fake = self.G(z).detach()
        d_real, d_fake = self.D(real), self.D(fake)
        loss_d = self.bce(d_real, torch.ones_like(d_real)) + self.bce(d_fake, torch.zeros_like(d_fake))
        self.opt_d.zero_grad()
        loss_d.backward()
        self.opt_d.step()
        return loss_d.detach()

    def train_g(self, batch_size):
        z = torch.randn(batch_size, self.z_dim, device=device)
        d_out = self.D(self.G(z))
        loss_g = self.bce(d_out, torch.ones_like(d_out))
        self.opt_g.zero_grad()
        loss_g.backward()
        self.opt_g.step()
        return loss_g.detach()

    def train(self, data, epochs):
        for epoch in range(epochs):
            d_losses, g_losses = [], []
            for real in data:
                d_losses.append(self.train_d(real))
                g_losses.append(self.train_g(real.size(0)))
            print(f"epoch {epoch} loss_d {torch.stack(d_losses).mean().item():.4f} "
                  f"loss_g {torch.stack(g_losses).mean().item():.4f}")


angles = torch.rand(30, 64, device=device) * 6.2832
data = torch.stack([angles.cos(), angles.sin()], -1) + 0.05 * torch.randn(30, 64, 2, device=device)
trainer = GANTrainer()
trainer.train(data, epochs=4)

print("G checksum", round(sum(p.double().sum() for p in trainer.G.parameters()).item(), 4))
print("D checksum", round(sum(p.double().sum() for p in trainer.D.parameters()).item(), 4))
