# StyleGAN2-style lazy R1 penalty: every d_reg_every=16 steps a second D step with autograd.grad(create_graph=True) on real images
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import autograd

torch.manual_seed(0)
device = "cuda"

latent, data_dim, batch = 16, 48, 32
r1_gamma = 10.0
d_reg_every = 16
iters = 320

generator = nn.Sequential(nn.Linear(latent, 96), nn.LeakyReLU(0.2), nn.Linear(96, data_dim), nn.Tanh()).to(device)
discriminator = nn.Sequential(nn.Linear(data_dim, 96), nn.LeakyReLU(0.2), nn.Linear(96, 1)).to(device)
d_reg_ratio = d_reg_every / (d_reg_every + 1)
g_optim = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
d_optim = torch.optim.Adam(discriminator.parameters(), lr=2e-3 * d_reg_ratio, betas=(0.0, 0.99 ** d_reg_ratio))

dataset = torch.tanh(torch.randn(64, batch, data_dim, device=device) * 0.5 + 0.2)


def d_logistic_loss(real_pred, fake_pred):
    return F.softplus(-real_pred).mean() + F.softplus(fake_pred).mean()


def d_r1_loss(real_pred, real_img):
    grad_real, = autograd.grad(outputs=real_pred.sum(), inputs=real_img, create_graph=True)
    return grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()


r1_loss = torch.tensor(0.0, device=device)
r1_steps = 0
for idx in range(iters):
    real_img = dataset[idx % len(dataset)]

    noise = torch.randn(batch, latent, device=device)
    fake_img = generator(noise)
    fake_pred = discriminator(fake_img.detach())
    real_pred = discriminator(real_img)
    d_loss = d_logistic_loss(real_pred, fake_pred)
    discriminator.zero_grad()
    d_loss.backward()
    d_optim.step()

    d_regularize = idx % d_reg_every == 0
    if d_regularize:
        real_img.requires_grad = True
        real_pred = discriminator(real_img)
        r1_loss = d_r1_loss(real_pred, real_img)
        discriminator.zero_grad()
        (r1_gamma / 2 * r1_loss * d_reg_every + 0 * real_pred[0]).backward()
        d_optim.step()
        r1_steps += 1

    noise = torch.randn(batch, latent, device=device)
    fake_img = generator(noise)
    fake_pred = discriminator(fake_img)
    g_loss = F.softplus(-fake_pred).mean()
    generator.zero_grad()
    g_loss.backward()
    g_optim.step()

    if idx % 64 == 0:
        print(f"{idx}: d {d_loss.item():.4f} g {g_loss.item():.4f} r1 {r1_loss.item():.4f}")

print("iters", iters, "r1_steps", r1_steps)
print(f"final d {d_loss.item():.4f} g {g_loss.item():.4f} r1 {r1_loss.item():.4f}")
print("G checksum", round(sum(p.double().sum() for p in generator.parameters()).item(), 4))
print("D checksum", round(sum(p.double().sum() for p in discriminator.parameters()).item(), 4))
