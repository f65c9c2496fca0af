"""A convolutional classifier under bfloat16 autocast (no GradScaler), SGD with Nesterov
momentum and a OneCycleLR schedule stepped after every batch."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))

model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=steps)
images = torch.randn(steps, 32, 3, 32, 32)
labels = torch.randint(0, 10, (steps, 32))

for step in range(steps):
    x, y = images[step].to(device, non_blocking=True), labels[step].to(device, non_blocking=True)
    with torch.autocast(device_type="cuda" if device == "cuda" else "cpu", dtype=torch.bfloat16):
        out = model(x)
        loss = F.cross_entropy(out, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.4f}")

print(f"final loss {loss.item():.6f}")
