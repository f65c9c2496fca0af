"""The DCGAN tutorial's step with transposed-conv G and strided-conv D on 16x16 images, D without a final Sigmoid and BCEWithLogitsLoss, two Adam optimizers zeroed with set_to_none."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
nz, ngf, ndf, batch_size = 32, 32, 32, 64
netG = nn.Sequential(
    nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
    nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
    nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh()).to(device)
netD = nn.Sequential(
    nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
    nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Flatten()).to(device)
criterion = nn.BCEWithLogitsLoss()
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
real_images = torch.rand(steps, batch_size, 3, 16, 16, device=device) * 2 - 1
noise_bank = torch.randn(steps, batch_size, nz, 1, 1, device=device)
ones = torch.ones(batch_size, 1, device=device)
zeros = torch.zeros(batch_size, 1, device=device)

for i in range(steps):
    optD.zero_grad(set_to_none=True)
    fake = netG(noise_bank[i])
    loss_d = criterion(netD(real_images[i]), ones) + criterion(netD(fake.detach()), zeros)
    loss_d.backward()
    optD.step()
    optG.zero_grad(set_to_none=True)
    loss_g = criterion(netD(fake), ones)
    loss_g.backward()
    optG.step()
    if i % 50 == 0:
        print(f"[{i}/{steps}] loss_D {loss_d.item():.4f} loss_G {loss_g.item():.4f}")

print(f"final loss {loss_g.item():.6f}")
