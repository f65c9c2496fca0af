# tutorial-style loop: model.train() once before the epochs, model.eval() for validation at each epoch's end (never reset)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(
    nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Linear(64, 3),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
train_x = torch.randn(25, 32, 20, device=device) * 2 + 1
train_y = torch.randint(0, 3, (25, 32), device=device)
val_x = torch.randn(128, 20, device=device) * 2 + 1
val_y = torch.randint(0, 3, (128,), device=device)

model.train()
for epoch in range(3):
    running = 0.0
    for x, y in zip(train_x, train_y):
        optimizer.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        running += loss.item()
    model.eval()
    with torch.no_grad():
        val_loss = F.cross_entropy(model(val_x), val_y).item()
    print(f"epoch {epoch} train {running / len(train_x):.4f} val {val_loss:.4f}")
print("running_mean sum", round(model[1].running_mean.sum().item(), 4))
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 4))
