# DDPM-from-scratch notebook shape: get_loss(model, x0, generator) draws timesteps and noise from its own device torch.Generator
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

T = 100
betas = torch.linspace(1e-4, 0.02, T, device=device)
alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.t_embed = nn.Embedding(T, 32)
        self.net = nn.Sequential(nn.Linear(16 + 32, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 16))

    def forward(self, x, t):
        return self.net(torch.cat([x, self.t_embed(t)], dim=-1))


def get_loss(model, x0, generator):
    noise = torch.randn(x0.shape, generator=generator, device=x0.device)
    timesteps = torch.randint(0, T, (x0.shape[0],), generator=generator, device=x0.device)
    a = alphas_cumprod[timesteps].unsqueeze(-1)
    noisy = a.sqrt() * x0 + (1 - a).sqrt() * noise
    return F.mse_loss(model(noisy, timesteps), noise)


model = Denoiser().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
noise_generator = torch.Generator(device=device).manual_seed(1234)
clean = torch.randn(20, 64, 16, device=device).tanh()

for epoch in range(3):
    epoch_loss = 0.0
    for x0 in clean:
        loss = get_loss(model, x0, noise_generator)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
    print(f"epoch {epoch} mean loss {epoch_loss / len(clean):.5f}")
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
