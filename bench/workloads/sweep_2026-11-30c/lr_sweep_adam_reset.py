# hand-written learning-rate sweep: one model and Adam reset with load_state_dict before each trial lr
import copy

import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 4)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
initial = {"model": copy.deepcopy(model.state_dict()), "optimizer": copy.deepcopy(optimizer.state_dict())}

xs = torch.randn(16, 64, 20, device=device)
ys = (xs[..., :4].argmax(-1) + (xs[..., 4] > 1).long()) % 4
results = {}
for lr in (1e-3, 3e-3, 1e-2):
    model.load_state_dict(initial["model"])
    optimizer.load_state_dict(initial["optimizer"])
    for group in optimizer.param_groups:
        group["lr"] = lr
    for _epoch in range(3):
        epoch_loss = torch.zeros((), device=device)
        for x, y in zip(xs, ys):
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            epoch_loss += loss.detach()
    results[lr] = epoch_loss.item() / len(xs)
    print(f"lr {lr:g}: last epoch loss {results[lr]:.5f}")
best = min(results, key=results.get)
print("best lr", best, "param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
