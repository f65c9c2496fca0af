"""A logistic-regression tutorial: one Linear layer as a binary classifier over a pre-built list of GPU batches walked with enumerate, BCEWithLogitsLoss, plain SGD, the accuracy computed under torch.no_grad() every 100 steps."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "600"))
batch_size, in_dim = 32, 16
true_w = torch.randn(in_dim, device=device)
batches = []
for _ in range(steps):
    x = torch.randn(batch_size, in_dim, device=device)
    y = (x @ true_w > 0).float().unsqueeze(1)
    batches.append((x, y))
model = nn.Linear(in_dim, 1).to(device)
criterion = nn.BCEWithLogitsLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for i, (x, y) in enumerate(batches):
    optimizer.zero_grad()
    logits = model(x)
    loss = criterion(logits, y)
    loss.backward()
    optimizer.step()
    if i % 100 == 0:
        with torch.no_grad():
            acc = ((logits > 0).float() == y).float().mean().item()
        print(f"step {i} loss {loss.item():.4f} acc {acc:.3f}")

print(f"final loss {loss.item():.6f}")
