"""A time-series regression notebook's 1D CNN: Conv1d blocks over sensor windows, HuberLoss, Adam, a validation pass each epoch under no_grad and ReduceLROnPlateau stepped on its loss."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
epochs, batch_size, channels, window = 5, 64, 6, 128
per_epoch = max(1, steps // epochs)
train_x = torch.randn(per_epoch, batch_size, channels, window, device=device)
train_y = train_x[:, :, 0, -8:].mean(-1, keepdim=True) + 0.1 * torch.randn(per_epoch, batch_size, 1, device=device)
val_x = torch.randn(4, batch_size, channels, window, device=device)
val_y = val_x[:, :, 0, -8:].mean(-1, keepdim=True)
model = nn.Sequential(
    nn.Conv1d(channels, 32, 7, padding=3), nn.BatchNorm1d(32), nn.ReLU(),
    nn.Conv1d(32, 64, 5, padding=2, stride=2), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Conv1d(64, 64, 3, padding=1, stride=2), nn.BatchNorm1d(64), nn.ReLU(),
    nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(64, 1)).to(device)
criterion = nn.HuberLoss(delta=1.0)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=1)

for epoch in range(epochs):
    model.train()
    for x, y in zip(train_x, train_y):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val_loss = sum(criterion(model(x), y) for x, y in zip(val_x, val_y)) / len(val_x)
    scheduler.step(val_loss.item())
    print(f"epoch {epoch} train {loss.item():.4f} val {val_loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.1e}")

print(f"final loss {loss.item():.6f}")
