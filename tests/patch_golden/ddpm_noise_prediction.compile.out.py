"""DDPM training as the diffusers and denoising-diffusion-pytorch examples write it: betas and
alphas_cumprod precomputed on the device, a random timestep per sample, x_t made from x0 and
fresh noise by indexing the schedule with t, a small conv net conditioned on a sinusoidal time
embedding predicting the noise, Adam with gradient clipping, and an EMA of the weights updated
with lerp_ by a function called after each optimizer step."""
import copy
import math
import os

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
num_steps = int(os.environ.get("CG_STEPS", "200"))
T, batch_size, ema_decay = 1000, 32, 0.995

betas = torch.linspace(1e-4, 0.02, T, device=device)
alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
sqrt_ac = alphas_cumprod.sqrt()
sqrt_1m_ac = (1.0 - alphas_cumprod).sqrt()


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=-1)


class TinyUNet(nn.Module):
    def __init__(self, ch=32, tdim=64):
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, ch), nn.SiLU(), nn.Linear(ch, ch))
        self.conv_in = nn.Conv2d(1, ch, 3, padding=1)
        self.conv_mid = nn.Conv2d(ch, ch, 3, padding=1)
        self.norm = nn.GroupNorm(8, ch)
        self.conv_out = nn.Conv2d(ch, 1, 3, padding=1)

    def forward(self, x, t):
        emb = self.time_mlp(timestep_embedding(t, self.tdim))
        h = F.silu(self.conv_in(x))
        h = h + emb[:, :, None, None]
        h = F.silu(self.norm(self.conv_mid(h)))
        return self.conv_out(h)


@torch.no_grad()
def update_ema(ema_model, model, decay):
    for ema_p, p in zip(ema_model.parameters(), model.parameters()):
        ema_p.lerp_(p, 1 - decay)


model = TinyUNet().to(device)
ema_model = copy.deepcopy(model).requires_grad_(False)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
dataset = torch.rand(512, 1, 16, 16, device=device) * 2 - 1

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(num_steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    idx = torch.randint(0, dataset.size(0), (batch_size,), device=device)
    x0 = dataset[idx]
    t = torch.randint(0, T, (batch_size,), device=device)
    noise = torch.randn_like(x0)
    x_t = sqrt_ac[t].view(-1, 1, 1, 1) * x0 + sqrt_1m_ac[t].view(-1, 1, 1, 1) * noise
    loss = F.mse_loss(_cg_compiled_model(x_t, t), noise)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    update_ema(ema_model, model, ema_decay)
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
