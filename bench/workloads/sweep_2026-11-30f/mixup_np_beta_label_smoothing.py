# mixup (facebookresearch/mixup-cifar10 shape) with lam = np.random.beta(alpha, alpha) drawn in the loop before the step, CrossEntropyLoss(label_smoothing=0.1)
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
np.random.seed(0)
device = "cuda"
alpha = 1.0

train_x = torch.randn(40, 64, 3, 16, 16, device=device)
train_y = torch.randint(0, 10, (40, 64), device=device)
train_x += train_y[..., None, None, None].float() * 0.05

model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(32, 10),
).to(device)
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


def mixup_data(x, y, alpha=1.0):
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1
    batch_size = x.size()[0]
    index = torch.randperm(batch_size, device=x.device)
    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


for epoch in range(5):
    model.train()
    train_loss = 0.0
    correct = 0.0
    total = 0
    for inputs, targets in zip(train_x, train_y):
        inputs, targets_a, targets_b, lam = mixup_data(inputs, targets, alpha)
        outputs = model(inputs)
        loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        train_loss += loss.item()
        _, predicted = torch.max(outputs.data, 1)
        total += targets.size(0)
        correct += (lam * predicted.eq(targets_a.data).cpu().sum().float()
                    + (1 - lam) * predicted.eq(targets_b.data).cpu().sum().float()).item()
    print(f"epoch {epoch} loss {train_loss / len(train_x):.4f} acc {100.0 * correct / total:.2f}")

print(f"final loss {loss.item():.4f} last lam {lam:.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
