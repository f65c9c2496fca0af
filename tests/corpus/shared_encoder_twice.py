"""A siamese step: one encoder called on two inputs in the same iteration, so its forward
cannot be one graphed callable (the second call would overwrite the first one's activations)."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
encoder = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 32)).to(device)
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.05, momentum=0.9)
pairs = [(torch.randn(64, 16, device=device), torch.randn(64, 16, device=device)) for _ in range(8)]

for step in range(steps):
    left, right = pairs[step % len(pairs)]
    a = encoder(left)
    b = encoder(right)
    loss = (1 - nn.functional.cosine_similarity(a, b)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print(f"final loss {loss.item():.6f}")
