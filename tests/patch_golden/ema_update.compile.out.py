import copy
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)
ema = copy.deepcopy(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = [(torch.randn(16, 16, device=device), torch.randn(16, 1, device=device)) for _ in range(10)]
smoothed = torch.zeros((), device=device)

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for i in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, y = data[i % len(data)]
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(_cg_compiled_model(x), y)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for ema_p, p in zip(ema.parameters(), model.parameters()):
            ema_p.mul_(0.99).add_(p, alpha=0.01)
    smoothed = 0.9 * smoothed + 0.1 * loss.detach()

with torch.no_grad():
    ema_loss = nn.functional.mse_loss(ema(data[0][0]), data[0][1])
print(f"loss {loss.item():.6f} smoothed {smoothed.item():.6f} ema {ema_loss.item():.6f}")
