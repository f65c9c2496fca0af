"""pix2pix's training step (junyanz/pytorch-CycleGAN-and-pix2pix): the discriminator unfrozen
for its own update and frozen for the generator's with set_requires_grad, an L1 term beside the
adversarial one, two Adam optimizers, the losses read every few steps."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
netG = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32)).to(device)
netD = nn.Sequential(nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)).to(device)
optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
criterionGAN = nn.MSELoss()
criterionL1 = nn.L1Loss()
pairs = [(torch.randn(16, 32, device=device), torch.randn(16, 32, device=device)) for _ in range(20)]


def set_requires_grad(nets, requires_grad=False):
    for net in nets:
        for param in net.parameters():
            param.requires_grad = requires_grad


for step in range(steps):
    real_A, real_B = pairs[step % len(pairs)]
    fake_B = netG(real_A)
    set_requires_grad([netD], True)
    optimizer_D.zero_grad()
    pred_fake = netD(torch.cat((real_A, fake_B.detach()), 1))
    pred_real = netD(torch.cat((real_A, real_B), 1))
    loss_D = 0.5 * (criterionGAN(pred_fake, torch.zeros_like(pred_fake))
                    + criterionGAN(pred_real, torch.ones_like(pred_real)))
    loss_D.backward()
    optimizer_D.step()
    set_requires_grad([netD], False)
    optimizer_G.zero_grad()
    pred_fake = netD(torch.cat((real_A, fake_B), 1))
    loss_G = criterionGAN(pred_fake, torch.ones_like(pred_fake)) + 100.0 * criterionL1(fake_B, real_B)
    loss_G.backward()
    optimizer_G.step()
    if step % 50 == 49:
        print(f"step {step + 1}: loss_D {loss_D.item():.5f} loss_G {loss_G.item():.5f}")

checksum = sum(p.double().sum().item() for p in list(netG.parameters()) + list(netD.parameters()))
print(f"final loss_G {loss_G.item():.6f} checksum {checksum:.6f}")
