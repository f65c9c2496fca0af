"""A GAN under DDP: the generator and the discriminator are each DistributedDataParallel, each
with its own optimizer. Both DDP constructions are built under a side stream, and the graphed
generator is the module DDP wraps (netG.module), never the wrapper. Runs on the CPU (gloo)."""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

cuda = torch.cuda.is_available()
dist.init_process_group("nccl" if cuda else "gloo")
rank = dist.get_rank()
device = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
torch.manual_seed(0)
nz = 8
netG = DistributedDataParallel(nn.Sequential(nn.Linear(nz, 32), nn.ReLU(), nn.Linear(32, 16), nn.Tanh()).to(device))
netD = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)).to(device))
criterion = nn.BCEWithLogitsLoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
generator = torch.Generator().manual_seed(rank)
steps = int(os.environ.get("CG_STEPS", "200"))
dataset = [torch.randn(16, 16, generator=generator) for _ in range(steps)]
noise_bank = [torch.randn(16, nz, generator=generator).to(device) for _ in range(steps)]
ones, zeros = torch.ones(16, 1, device=device), torch.zeros(16, 1, device=device)

for i, real in enumerate(dataset):
    real = real.to(device)
    optimizerD.zero_grad()
    errD_real = criterion(netD(real), ones)
    errD_real.backward()
    fake = netG(noise_bank[i])
    errD_fake = criterion(netD(fake.detach()), zeros)
    errD_fake.backward()
    optimizerD.step()
    optimizerG.zero_grad()
    errG = criterion(netD(fake), ones)
    errG.backward()
    optimizerG.step()

print(f"rank {rank}: Loss_D {(errD_real + errD_fake).item():.6f} Loss_G {errG.item():.6f}")
dist.destroy_process_group()
