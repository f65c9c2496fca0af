# learning rate set by hand every step (`param_group["lr"] = lr_at(step)`, warmup + cosine) and gradients cleared by `for p in model.parameters(): p.grad = None`
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

base_lr = 1e-3
min_lr = 1e-5
warmup_steps = 30
total_steps = 300


def lr_at(step):
    if step < warmup_steps:
        return base_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return min_lr + 0.5 * (base_lr - min_lr) * (1 + math.cos(math.pi * progress))


model = nn.Sequential(nn.Embedding(100, 32), nn.Flatten(), nn.Linear(32 * 8, 128), nn.ReLU(), nn.Linear(128, 100)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=base_lr, betas=(0.9, 0.95))

tokens = torch.randint(0, 100, (total_steps, 16, 9), device=device)

for step in range(total_steps):
    lr = lr_at(step)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    batch = tokens[step]
    x, y = batch[:, :8], batch[:, 8]
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    for p in model.parameters():
        p.grad = None
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} lr {lr:.6f} loss {loss.item():.4f}")

print("final lr", f"{optimizer.param_groups[0]['lr']:.6f}", "final loss", round(loss.item(), 4))
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
