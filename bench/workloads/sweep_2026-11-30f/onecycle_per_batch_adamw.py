# OneCycleLR stepped every batch (with AdamW, so it cycles beta1 too), lr logged from scheduler.get_last_lr()
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

epochs = 5
train_x = torch.randn(40, 32, 3, 16, 16, device=device)
train_y = torch.randint(0, 10, (40, 32), device=device)

model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(32, 10),
).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, epochs=epochs, steps_per_epoch=len(train_x))

lrs = []
for epoch in range(epochs):
    model.train()
    epoch_loss = 0.0
    for inputs, targets in zip(train_x, train_y):
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=2.0)
        optimizer.step()
        scheduler.step()
        lrs.append(scheduler.get_last_lr()[0])
        epoch_loss += loss.item()
    print(f"epoch {epoch} loss {epoch_loss / len(train_x):.4f} lr {lrs[-1]:.6f}")

print("steps", len(lrs), "max lr", round(max(lrs), 6), "beta1", round(optimizer.param_groups[0]["betas"][0], 4))
print(f"final loss {loss.item():.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
