# EMA of the weights kept with torch._foreach_mul_/_foreach_add_ after each step, its decay warmed up from the step count; Adam(amsgrad=True, foreach=False)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(16, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 16)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, amsgrad=True, foreach=False)
ema_params = [p.detach().clone() for p in model.parameters()]
model_params = list(model.parameters())
ema_decay = 0.999

data = torch.randn(200, 32, 16, device=device)
noise_level = 0.3

global_step = 0
for epoch in range(2):
    for x0 in data:
        x = x0 + noise_level * torch.randn_like(x0)
        pred = model(x)
        loss = F.mse_loss(pred, x0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
        decay = min(ema_decay, (1 + global_step) / (10 + global_step))
        with torch.no_grad():
            torch._foreach_mul_(ema_params, decay)
            torch._foreach_add_(ema_params, model_params, alpha=1 - decay)
    print(f"epoch {epoch} loss {loss.item():.4f} decay {decay:.4f}")

with torch.no_grad():
    x = data[0]
    ema_model = nn.Sequential(nn.Linear(16, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 16)).to(device)
    for p, e in zip(ema_model.parameters(), ema_params):
        p.copy_(e)
    ema_loss = F.mse_loss(ema_model(x), x).item()
print("steps", global_step, "ema loss", round(ema_loss, 4))
print("ema checksum", round(sum(e.double().sum() for e in ema_params).item(), 4))
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
