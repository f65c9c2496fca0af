# sync-free metric tracking as in many research repos: a MetricTracker object keeps each step's detached loss tensor, epoch means at the end
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class MetricTracker:
    def __init__(self):
        self.values = defaultdict(list)

    def update(self, name, value):
        self.values[name].append(value)

    def epoch_means(self):
        means = {name: torch.stack(vals).mean().item() for name, vals in self.values.items()}
        self.values.clear()
        return means


model = nn.Sequential(nn.Conv1d(4, 16, 5, padding=2), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                      nn.Linear(16, 1)).to(device)
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
signals = torch.randn(25, 32, 4, 64, device=device)
targets = signals[:, :, 0].mean(-1, keepdim=True) * 4 + signals[:, :, 1].std(-1, keepdim=True)
tracker = MetricTracker()

for epoch in range(3):
    model.train()
    for x, y in zip(signals, targets):
        pred = model(x)
        loss = F.mse_loss(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tracker.update("loss", loss.detach())
        tracker.update("mae", (pred - y).abs().mean().detach())
    means = tracker.epoch_means()
    print(f"epoch {epoch} loss {means['loss']:.5f} mae {means['mae']:.5f}")
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
