"""The PyTorch word-language-model example's update: no optimizer object; gradients clipped,
then each parameter moved by hand (p.data.add_(p.grad, alpha=-lr)); the model zeroed first."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Embedding(50, 32), nn.Flatten(), nn.Linear(8 * 32, 64), nn.Tanh(), nn.Linear(64, 50)).to(device)
criterion = nn.CrossEntropyLoss()
lr, clip = 0.5, 0.25
batches = [(torch.randint(0, 50, (20, 8), device=device), torch.randint(0, 50, (20,), device=device))
           for _ in range(10)]

total_loss = 0.0
for step in range(steps):
    data, targets = batches[step % len(batches)]
    model.zero_grad()
    output = model(data)
    loss = criterion(output, targets)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
    total_loss += loss.item()
    if step % 50 == 49:
        print(f"step {step + 1} loss {total_loss / 50:.5f}")
        total_loss = 0.0
