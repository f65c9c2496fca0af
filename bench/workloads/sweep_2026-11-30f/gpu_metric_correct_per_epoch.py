# accuracy accumulated on the GPU (correct += (pred == y).sum(), right after the forward) and read once per epoch with .item()
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

train_x = torch.randn(50, 64, 40, device=device)
train_y = (train_x[..., :6] ** 2).sum(-1).mul(0.8).long().clamp(max=7)

model = nn.Sequential(nn.Linear(40, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 8)).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)

for epoch in range(4):
    model.train()
    correct = 0
    total = 0
    loss_sum = torch.zeros((), device=device)
    for x, y in zip(train_x, train_y):
        optimizer.zero_grad()
        logits = model(x)
        correct += (logits.argmax(dim=1) == y).sum()
        loss = criterion(logits, y)
        loss.backward()
        optimizer.step()
        loss_sum += loss.detach() * y.size(0)
        total += y.size(0)
    print(f"epoch {epoch} loss {loss_sum.item() / total:.4f} acc {correct.item() / total:.4f}")

print(f"final loss {loss.item():.4f} correct {int(correct)}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
