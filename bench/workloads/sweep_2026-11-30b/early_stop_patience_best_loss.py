# regression loop with early stopping on a host-read smoothed loss (patience), logging every 10 steps, break out of both loops
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(8, 64), nn.SiLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9)
loss_fn = nn.HuberLoss(delta=0.5)
coef = torch.randn(8, 1, device=device)
xs = torch.randn(4, 40, 32, 8, device=device)
ys = xs @ coef + 0.05 * torch.randn(4, 40, 32, 1, device=device)

best, bad_steps, patience, stopped = float("inf"), 0, 15, False
smoothed = None
global_step = 0
for epoch in range(4):
    for step, (x, y) in enumerate(zip(xs[epoch], ys[epoch])):
        optimizer.zero_grad()
        pred = model(x)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        global_step += 1
        smoothed = loss.item() if smoothed is None else 0.9 * smoothed + 0.1 * loss.item()
        if step % 10 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.5f}")
        if smoothed < best - 1e-4:
            best, bad_steps = smoothed, 0
        else:
            bad_steps += 1
        if bad_steps >= patience or smoothed < 0.002:
            stopped = True
            break
    if stopped:
        break
print("stopped at", global_step, "best", round(best, 5), "last loss", round(loss.item(), 5))
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 4))
