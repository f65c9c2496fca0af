# DataLoader over pinned CPU tensors (pin_memory=True), x = x.to(device, non_blocking=True) before the step; last batch partial
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda"

features = torch.randn(2000, 32)
teacher_w = torch.randn(32, 10)
labels = (features @ teacher_w + 0.5 * torch.randn(2000, 10)).argmax(1)
train_ds = TensorDataset(features, labels)
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, pin_memory=True, num_workers=0)

model = nn.Sequential(
    nn.Linear(32, 128), nn.ReLU(), nn.Dropout(0.1),
    nn.Linear(128, 128), nn.ReLU(),
    nn.Linear(128, 10),
).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)

steps = 0
for epoch in range(6):
    model.train()
    running_loss = 0.0
    for x, y in train_loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        output = model(x)
        loss = criterion(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running_loss += loss.item() * x.size(0)
        steps += 1
    print(f"epoch {epoch} train_loss {running_loss / len(train_ds):.4f}")

print("steps", steps)
print(f"final loss {loss.item():.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
