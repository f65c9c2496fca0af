# decoupled weight decay by hand (p.mul_(1 - lr * wd) under no_grad, lr read from param_groups), model.zero_grad(set_to_none=False)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(20, 80), nn.GELU(), nn.LayerNorm(80), nn.Linear(80, 4)).to(device)
decay = [p for n, p in model.named_parameters() if n.endswith("weight") and p.dim() > 1]
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=3)
weight_decay = 0.05
batches = [(torch.randn(64, 20).to(device), torch.randint(0, 4, (64,)).to(device)) for _ in range(16)]

for epoch in range(3):
    for x, y in batches:
        model.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        with torch.no_grad():
            lr = optimizer.param_groups[0]["lr"]
            for p in decay:
                p.mul_(1 - lr * weight_decay)
        optimizer.step()
    scheduler.step()
    print(f"epoch {epoch} lr {scheduler.get_last_lr()[0]:.4f} loss {loss.item():.4f}")
print("weight norm", round(sum(p.norm().item() for p in decay), 4))
