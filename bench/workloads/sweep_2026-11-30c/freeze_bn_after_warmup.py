# detection/fine-tuning shape (mmdet norm_eval): model.train() each epoch, then BatchNorm layers put back in eval once BN is frozen
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


def set_bn_eval(m):
    if isinstance(m, nn.BatchNorm2d):
        m.eval()


model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
    nn.Conv2d(16, 32, 3, padding=1, stride=2), nn.BatchNorm2d(32), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 5),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
criterion = nn.CrossEntropyLoss()
images = torch.randn(15, 16, 3, 16, 16, device=device) * 2 + 0.5
labels = torch.randint(0, 5, (15, 16), device=device)
freeze_bn_epoch = 1

for epoch in range(3):
    model.train()
    if epoch >= freeze_bn_epoch:
        model.apply(set_bn_eval)
    running = torch.zeros((), device=device)
    for img, target in zip(images, labels):
        out = model(img)
        loss = criterion(out, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.detach()
    print(f"epoch {epoch} loss {running.item() / len(images):.5f}")
print("bn1 running_mean", round(model[1].running_mean.sum().item(), 5),
      "batches", model[1].num_batches_tracked.item())
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
