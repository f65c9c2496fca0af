"""A metric-learning loop: one embedding network applied to an anchor, a positive and a negative,
trained with a triplet margin loss."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))

embed = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 16)).to(device)
criterion = nn.TripletMarginLoss(margin=1.0)
optimizer = torch.optim.SGD(embed.parameters(), lr=0.01, momentum=0.9)
triplets = [tuple(torch.randn(64, 32) for _ in range(3)) for _ in range(steps)]

for step, (anchor, positive, negative) in enumerate(triplets):
    anchor, positive, negative = anchor.to(device), positive.to(device), negative.to(device)
    loss = criterion(embed(anchor), embed(positive), embed(negative))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
