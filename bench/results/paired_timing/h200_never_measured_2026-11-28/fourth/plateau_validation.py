"""Epochs of training batches, a validation pass under torch.no_grad() after each, and
ReduceLROnPlateau stepped with the validation loss."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
epochs = int(os.environ.get("CG_EPOCHS", "5"))
batches = int(os.environ.get("CG_STEPS", "200")) // epochs

model = nn.Sequential(nn.Linear(20, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 3)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1)
train = [(torch.randn(64, 20), torch.randint(0, 3, (64,))) for _ in range(batches)]
val = [(torch.randn(64, 20), torch.randint(0, 3, (64,))) for _ in range(4)]

for epoch in range(epochs):
    model.train()
    for x, y in train:
        x, y = x.to(device), y.to(device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    with torch.no_grad():
        val_loss = sum(F.cross_entropy(model(x.to(device)), y.to(device)).item() for x, y in val) / len(val)
    scheduler.step(val_loss)
    print(f"epoch {epoch} train {loss.item():.4f} val {val_loss:.4f} lr {optimizer.param_groups[0]['lr']:.2e}")

print(f"final loss {loss.item():.6f}")
