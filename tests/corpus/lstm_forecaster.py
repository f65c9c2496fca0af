"""A time-series forecaster: an nn.LSTM over windows of a noisy signal, gradient clipping, Adam
and a step-decay learning-rate schedule stepped every epoch."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
batches_per_epoch = 20


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(1, 64, num_layers=2, batch_first=True)
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


t = torch.arange(0, 4000, dtype=torch.float32)
signal = torch.sin(t / 20) + 0.1 * torch.randn_like(t)
windows = signal.unfold(0, 33, 1)
model = Forecaster().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
criterion = nn.MSELoss()

for epoch in range(steps // batches_per_epoch):
    for i in range(batches_per_epoch):
        batch = windows[(epoch * batches_per_epoch + i) * 16:(epoch * batches_per_epoch + i + 1) * 16]
        x, y = batch[:, :32].unsqueeze(-1).to(device), batch[:, 32:].to(device)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    scheduler.step()
    print(f"epoch {epoch} loss {loss.item():.6f} lr {scheduler.get_last_lr()[0]:.5f}")

print(f"final loss {loss.item():.6f}")
