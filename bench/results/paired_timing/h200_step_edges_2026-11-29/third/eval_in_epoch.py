import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
train_set = [(torch.randn(16, 10, device=device), torch.randint(0, 2, (16,), device=device)) for _ in range(steps // 4)]
val_set = [(torch.randn(16, 10, device=device), torch.randint(0, 2, (16,), device=device)) for _ in range(4)]

for epoch in range(4):
    for x, y in train_set:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        val_loss = sum(nn.functional.cross_entropy(model(x), y) for x, y in val_set) / len(val_set)
    print(f"epoch {epoch} train {loss.item():.6f} val {val_loss.item():.6f}")
