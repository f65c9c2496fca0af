# continual-learning "naive fine-tuning" loop: a fresh Adam built at the start of each task (experience), as Avalanche's strategies reset it
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
tasks = []
for _t in range(3):
    shift = torch.randn(16, device=device) * 2
    xs = torch.randn(12, 32, 16, device=device) + shift
    ys = torch.randint(0, 4, (12, 32), device=device)
    tasks.append((xs, ys))

for task_id, (xs, ys) in enumerate(tasks):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # reset the optimizer for the new experience
    for _epoch in range(2):
        for x, y in zip(xs, ys):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        accs = [(model(tx.flatten(0, 1)).argmax(1) == ty.flatten()).float().mean().item() for tx, ty in tasks]
    first = optimizer.state[model[0].weight]
    print(f"task {task_id} loss {loss.item():.4f} adam step {int(first['step'].item())}",
          "exp_avg_sq", round(first["exp_avg_sq"].sum().item(), 8), "accs", [round(a, 3) for a in accs])
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 4))
