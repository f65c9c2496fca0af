import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(16, 32, device=device), torch.randn(16, 1, device=device)) for _ in range(steps)]

for x, y in data:
    optimizer.zero_grad()
    prediction = model(x)
    loss = nn.functional.mse_loss(prediction, y)
    loss.backward()
    optimizer.step()

print(f"final loss {loss.item():.6f}")
print("final prediction mean", round(prediction.mean().item(), 6))
