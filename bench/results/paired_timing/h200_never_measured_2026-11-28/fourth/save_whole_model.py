"""Whole-model checkpoints as many scripts write them: the best model kept with copy.deepcopy
during training and evaluated at the end, and the whole module saved with torch.save."""
import copy
import os
import tempfile

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(256, 32, device=device)
y = x[:, :1] * 2 + 0.1 * torch.randn(256, 1, device=device)
best, best_loss = None, float("inf")
for step in range(steps):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    if step % 50 == 49 and loss.item() < best_loss:
        best_loss, best = loss.item(), copy.deepcopy(model)
        model.train()
with torch.no_grad():
    model.eval()
    print(f"final loss {nn.functional.mse_loss(model(x), y).item():.6f}")
    print(f"best loss {nn.functional.mse_loss(best(x + 1), y).item():.6f}")
path = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save(model, path)
restored = torch.load(path, weights_only=False)
print(f"restored loss {nn.functional.mse_loss(restored(x), y).item():.6f}")
