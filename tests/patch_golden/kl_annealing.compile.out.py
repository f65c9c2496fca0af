"""A VAE trained with KL annealing: the KL term's weight ramps up with the step count, a plain
Python number computed in the loop and read by the loss."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
warmup_steps = 100


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
        self.decoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64))

    def forward(self, x):
        mu, logvar = self.encoder(x).chunk(2, dim=-1)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.decoder(z), mu, logvar


model = VAE().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [torch.rand(32, 64) for _ in range(steps)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step, x in enumerate(data):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x = x.to(device)
    beta = min(1.0, step / warmup_steps)
    recon, mu, logvar = _cg_compiled_model(x)
    kld = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    loss = F.mse_loss(recon, x) + beta * kld
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} beta {beta:.2f} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
