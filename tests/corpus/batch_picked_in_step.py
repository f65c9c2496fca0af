import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
generator = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32)).to(device)
critic = nn.Sequential(nn.Linear(32, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1)).to(device)
opt_c = torch.optim.SGD(critic.parameters(), lr=1e-3)
opt_g = torch.optim.SGD(generator.parameters(), lr=1e-3)
criterion = nn.BCEWithLogitsLoss()
noise_bank = torch.randn(steps, 64, 16, device=device)
real = torch.randn(steps, 64, 32, device=device)
ones, zeros = torch.ones(64, 1, device=device), torch.zeros(64, 1, device=device)

for i in range(steps):
    opt_c.zero_grad(set_to_none=True)
    fake = generator(noise_bank[i])
    loss_c = criterion(critic(real[i]), ones) + criterion(critic(fake.detach()), zeros)
    loss_c.backward()
    opt_c.step()
    opt_g.zero_grad(set_to_none=True)
    loss_g = criterion(critic(fake), ones)
    loss_g.backward()
    opt_g.step()
    if i % 50 == 0:
        print(f"[{i}/{steps}] critic {loss_c.item():.4f} generator {loss_g.item():.4f}")

print(f"final loss {loss_g.item():.6f}")
