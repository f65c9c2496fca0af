"""A linear-regression-to-MLP tutorial: a tiny MLP regressor on a bank of pre-made batches indexed cyclically (the batch bound at the top of the loop body), MSELoss, SGD with momentum, zero_grad(set_to_none=True) after the step."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "600"))
bank, batch_size, in_dim = 16, 64, 8
xs = torch.randn(bank, batch_size, in_dim, device=device)
coef = torch.linspace(-1.0, 1.0, in_dim, device=device)
ys = (xs @ coef).unsqueeze(-1) + 0.5 * torch.sin(xs[..., :1]) + 0.05 * torch.randn(bank, batch_size, 1, device=device)
model = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

optimizer.zero_grad(set_to_none=True)
for step in range(steps):
    x = xs[step % len(xs)]
    y = ys[step % len(ys)]
    out = model(x)
    loss = criterion(out, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

print(f"final loss {loss.item():.6f}")
