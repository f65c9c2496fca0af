# pytorch/examples dcgan/main.py: netG/netD with weights_init, BCELoss, two Adam optimizers, label.fill_, fake.detach(), D(x)/D(G(z)) host reads, netG(fixed_noise) every 100 iterations with grad on, per-epoch state_dict checkpoints
import argparse
import io
import random

import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data

parser = argparse.ArgumentParser()
parser.add_argument('--batchSize', type=int, default=64)
parser.add_argument('--imageSize', type=int, default=16)
parser.add_argument('--nz', type=int, default=32)
parser.add_argument('--ngf', type=int, default=32)
parser.add_argument('--ndf', type=int, default=32)
parser.add_argument('--niter', type=int, default=10)
parser.add_argument('--lr', type=float, default=0.0002)
parser.add_argument('--beta1', type=float, default=0.5)
parser.add_argument('--dry-run', action='store_true')
parser.add_argument('--ngpu', type=int, default=1)
parser.add_argument('--manualSeed', type=int, default=999)
opt = parser.parse_args()

random.seed(opt.manualSeed)
torch.manual_seed(opt.manualSeed)

# a fake "dataset": 1200 3x16x16 images in [-1, 1] (blobs), iterated as (image, label) pairs
_g = torch.Generator().manual_seed(0)
_yy, _xx = torch.meshgrid(torch.linspace(-1, 1, 16), torch.linspace(-1, 1, 16), indexing="ij")
_centers = torch.rand(1200, 2, generator=_g) * 1.2 - 0.6
_colors = torch.rand(1200, 3, 1, 1, generator=_g) * 2 - 1
_blobs = torch.exp(-((_xx - _centers[:, 0, None, None]) ** 2 + (_yy - _centers[:, 1, None, None]) ** 2) / 0.1)
dataset = torch.utils.data.TensorDataset((_blobs[:, None] * _colors).clamp(-1, 1), torch.zeros(1200, dtype=torch.long))
dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=True, num_workers=0)

device = "cuda"
ngpu = int(opt.ngpu)
nz = int(opt.nz)
ngf = int(opt.ngf)
ndf = int(opt.ndf)
nc = 3


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, ngpu):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh()
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)
        return output


netG = Generator(ngpu).to(device)
netG.apply(weights_init)


class Discriminator(nn.Module):
    def __init__(self, ngpu):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            output = nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        else:
            output = self.main(input)

        return output.view(-1, 1).squeeze(1)


netD = Discriminator(ngpu).to(device)
netD.apply(weights_init)

criterion = nn.BCELoss()

fixed_noise = torch.randn(opt.batchSize, nz, 1, 1, device=device)
real_label = 1
fake_label = 0

# setup optimizer
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

checkpoints = {}
for epoch in range(opt.niter):
    for i, data in enumerate(dataloader, 0):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        # train with real
        netD.zero_grad()
        real_cpu = data[0].to(device)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label,
                           dtype=real_cpu.dtype, device=device)

        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        # train with fake
        noise = torch.randn(batch_size, nz, 1, 1, device=device)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        if i % 6 == 0:
            print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
                  % (epoch, opt.niter, i, len(dataloader),
                     errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
        if i % 100 == 0:
            # vutils.save_image(real_cpu, ...) then of the fixed-noise samples, in the original
            fake = netG(fixed_noise)
            print('fixed-noise samples: mean %.4f std %.4f' % (fake.detach().mean().item(), fake.detach().std().item()))

        if opt.dry_run:
            break
    # do checkpointing
    buffer = io.BytesIO()
    torch.save(netG.state_dict(), buffer)
    checkpoints['netG_epoch_%d.pth' % epoch] = buffer.getvalue()
    buffer = io.BytesIO()
    torch.save(netD.state_dict(), buffer)
    checkpoints['netD_epoch_%d.pth' % epoch] = buffer.getvalue()

checksum_g = sum(p.double().sum() for p in netG.parameters()).item()
checksum_d = sum(p.double().sum() for p in netD.parameters()).item()
print(f"final Loss_D {errD.item():.4f} Loss_G {errG.item():.4f} checksum G {checksum_g:.4f} D {checksum_d:.4f} "
      f"checkpoints {len(checkpoints)}")
