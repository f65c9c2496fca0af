import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 5)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
dataset = [{"x": torch.randn(32, 20), "y": torch.randint(0, 5, (32,))} for _ in range(10)]

for step in range(steps):
    batch = dataset[step % len(dataset)]
    batch = {k: v.to(device) for k, v in batch.items()}
    logits = model(batch["x"])
    loss = F.cross_entropy(logits, batch["y"])
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()

print(f"final loss {loss.item():.6f}")
