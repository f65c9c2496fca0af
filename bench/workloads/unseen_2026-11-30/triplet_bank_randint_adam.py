"""A triplet-loss embedding network as in the person re-id / face-embedding tutorials: an MLP embedder whose outputs are L2-normalised with F.normalize, nn.TripletMarginLoss, Adam; each step's anchor, positive (same class) and negative (another class) rows are gathered from a per-class feature bank on the device with torch.randint indices drawn on the device."""
import os

import torch
import torch.nn.functional as F
from torch import nn


class EmbeddingNet(nn.Module):
    def __init__(self, in_dim=128, hidden=256, emb_dim=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, emb_dim))

    def forward(self, x):
        return F.normalize(self.net(x), p=2, dim=1)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
num_classes, per_class, in_dim, batch_size = 50, 40, 128, 128
centers = torch.randn(num_classes, 1, in_dim, device=device)
bank = 0.3 * centers + torch.randn(num_classes, per_class, in_dim, device=device)

model = EmbeddingNet(in_dim).to(device)
criterion = nn.TripletMarginLoss(margin=0.2, p=2)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

model.train()
for step in range(steps):
    cls = torch.randint(0, num_classes, (batch_size,), device=device)
    neg_cls = (cls + torch.randint(1, num_classes, (batch_size,), device=device)) % num_classes
    anchor = bank[cls, torch.randint(0, per_class, (batch_size,), device=device)]
    positive = bank[cls, torch.randint(0, per_class, (batch_size,), device=device)]
    negative = bank[neg_cls, torch.randint(0, per_class, (batch_size,), device=device)]
    loss = criterion(model(anchor), model(positive), model(negative))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
