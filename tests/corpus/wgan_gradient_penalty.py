"""WGAN-GP: a critic trained with a gradient penalty (torch.autograd.grad with create_graph on
interpolated samples), a generator stepped every fifth critic step, Adam for both."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
latent, features = 16, 32

generator = nn.Sequential(nn.Linear(latent, 64), nn.ReLU(), nn.Linear(64, features)).to(device)
critic = nn.Sequential(nn.Linear(features, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)).to(device)
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-4, betas=(0.5, 0.9))
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
real_data = torch.randn(steps, 64, features) * 0.5 + 1.0


def gradient_penalty(real, fake):
    alpha = torch.rand(real.size(0), 1, device=real.device)
    mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    grads, = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


for step in range(steps):
    real = real_data[step].to(device)
    fake = generator(torch.randn(real.size(0), latent, device=device)).detach()
    loss_c = critic(fake).mean() - critic(real).mean() + 10.0 * gradient_penalty(real, fake)
    opt_c.zero_grad()
    loss_c.backward()
    opt_c.step()
    if step % 5 == 0:
        loss_g = -critic(generator(torch.randn(real.size(0), latent, device=device))).mean()
        opt_g.zero_grad()
        loss_g.backward()
        opt_g.step()
    if step % 50 == 0:
        print(f"step {step} critic {loss_c.item():.4f}")

print(f"final critic loss {loss_c.item():.6f}")
