"""A beginner classification tutorial: a tiny MLP (Linear-ReLU-Linear-ReLU-Linear) over a pre-built list of GPU batches, CrossEntropyLoss, Adam, the loss printed once per epoch."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "600"))
epochs, batch_size, in_dim, num_classes = 4, 32, 20, 5
num_batches = max(1, steps // epochs)
true_w = torch.randn(in_dim, num_classes, device=device)
batches = []
for _ in range(num_batches):
    x = torch.randn(batch_size, in_dim, device=device)
    y = (x @ true_w).argmax(dim=1)
    batches.append((x, y))
model = nn.Sequential(
    nn.Linear(in_dim, 64), nn.ReLU(),
    nn.Linear(64, 32), nn.ReLU(),
    nn.Linear(32, num_classes)).to(device)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(epochs):
    for x, y in batches:
        optimizer.zero_grad()
        pred = model(x)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
