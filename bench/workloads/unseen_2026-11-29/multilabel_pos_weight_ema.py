"""A multi-label tagging notebook (e.g. movie genres from features): an MLP with 20 sigmoid outputs, BCEWithLogitsLoss with a per-label pos_weight, Adam, zero_grad after the step and an on-device EMA of the loss logged every 25 steps."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
num_features, num_labels, batch_size = 300, 20, 128
features = torch.randn(steps, batch_size, num_features, device=device)
label_rate = torch.linspace(0.02, 0.3, num_labels, device=device)
targets = (torch.rand(steps, batch_size, num_labels, device=device) < label_rate).float()
pos_weight = (1 - label_rate) / label_rate
model = nn.Sequential(
    nn.Linear(num_features, 256), nn.ReLU(), nn.Dropout(0.3),
    nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, num_labels)).to(device)
criterion = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
ema_loss = torch.zeros((), device=device)

model.train()
optimizer.zero_grad()
for step in range(steps):
    logits = model(features[step])
    loss = criterion(logits, targets[step])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    ema_loss = 0.98 * ema_loss + 0.02 * loss.detach()
    if step % 25 == 0:
        print(f"step {step} loss {loss.item():.4f} ema {ema_loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
