# gradient accumulation with `(i + 1) % accum == 0 or (i + 1) == len(loader)` (the last partial group steps too), autocast + GradScaler, scaler.unscale_ then clip
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(48, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 6)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
scaler = torch.cuda.amp.GradScaler()
accum_iter = 4
max_norm = 1.0

xs = torch.randn(30, 32, 48, device=device)   # 30 micro-batches: groups of 4, 4, ..., and a last one of 2
ys = torch.randint(0, 6, (30, 32), device=device)
loader = list(zip(xs, ys))

updates = 0
for epoch in range(6):
    model.train()
    optimizer.zero_grad()
    for data_iter_step, (samples, targets) in enumerate(loader):
        with torch.cuda.amp.autocast():
            outputs = model(samples)
            loss = F.cross_entropy(outputs, targets)
        loss = loss / accum_iter
        scaler.scale(loss).backward()
        if (data_iter_step + 1) % accum_iter == 0 or (data_iter_step + 1) == len(loader):
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            updates += 1
    print(f"epoch {epoch} loss {loss.item() * accum_iter:.4f} scale {scaler.get_scale():.1f}")

print("updates", updates)
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
