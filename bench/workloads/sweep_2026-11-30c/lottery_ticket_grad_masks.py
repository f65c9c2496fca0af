# Lottery-Ticket (Frankle & Carbin) repo shape: masks rebuilt by magnitude each round, pruned weights' gradients zeroed before step
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 5)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
xs = torch.randn(16, 64, 32, device=device)
ys = torch.randint(0, 5, (16, 64), device=device)
masks = {name: torch.ones_like(p) for name, p in model.named_parameters() if "weight" in name}
prune_percent = 25

for round_ in range(3):
    for epoch in range(2):
        for x, y in zip(xs, ys):
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            for name, p in model.named_parameters():
                if name in masks:
                    p.grad.mul_(masks[name])
            optimizer.step()
        print(f"round {round_} epoch {epoch} loss {loss.item():.5f}")
    # prune the smallest surviving weights of each layer and zero them
    new_masks = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in masks:
                alive = p[masks[name].bool()].abs()
                threshold = torch.quantile(alive, prune_percent / 100)
                new_masks[name] = torch.where(p.abs() < threshold, torch.zeros_like(p), masks[name])
                p.mul_(new_masks[name])
    masks = new_masks

alive = sum(int(m.sum()) for m in masks.values())
print("alive weights", alive, "param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
