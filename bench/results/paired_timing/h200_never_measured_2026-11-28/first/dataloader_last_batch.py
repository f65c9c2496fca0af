"""A DataLoader over a TensorDataset, shuffled, whose last batch of each epoch is smaller
(drop_last=False), pinned memory and non-blocking copies, three epochs."""
import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
samples = int(os.environ.get("CG_STEPS", "200")) * 16
dataset = TensorDataset(torch.randn(samples + 40, 24), torch.randint(0, 5, (samples + 40,)))
loader = DataLoader(dataset, batch_size=48, shuffle=True, pin_memory=device == "cuda")

model = nn.Sequential(nn.Linear(24, 96), nn.SiLU(), nn.Linear(96, 96), nn.SiLU(), nn.Linear(96, 5)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)

for epoch in range(3):
    total, count = 0.0, 0
    for inputs, labels in loader:
        inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * inputs.size(0)
        count += inputs.size(0)
    print(f"epoch {epoch} loss {total / count:.4f}")

print(f"final loss {loss.item():.6f}")
