# SWA: torch.optim.swa_utils.AveragedModel.update_parameters every step after swa_start, SWALR per epoch after it, update_bn at the end
import torch
import torch.nn as nn
from torch.optim.swa_utils import SWALR, AveragedModel, update_bn

torch.manual_seed(0)
device = "cuda"

train_x = torch.randn(30, 64, 20, device=device)
train_y = (train_x[..., :5].sum(-1) > 0).long()

model = nn.Sequential(
    nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Linear(64, 2),
).to(device)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
swa_model = AveragedModel(model)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
swa_start = 5
swa_scheduler = SWALR(optimizer, swa_lr=0.05, anneal_epochs=2)

swa_updates = 0
for epoch in range(10):
    model.train()
    for x, y in zip(train_x, train_y):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            swa_updates += 1
    if epoch >= swa_start:
        swa_scheduler.step()
    else:
        scheduler.step()
    print(f"epoch {epoch} loss {loss.item():.4f} lr {optimizer.param_groups[0]['lr']:.4f}")

update_bn(train_x, swa_model)
swa_model.eval()
with torch.no_grad():
    acc = (swa_model(train_x.flatten(0, 1)).argmax(1) == train_y.flatten()).float().mean().item()

print("swa_updates", swa_updates, "n_averaged", int(swa_model.n_averaged.item()))
print(f"final loss {loss.item():.4f} swa acc {acc:.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
print("swa checksum", round(sum(p.double().sum() for p in swa_model.parameters()).item(), 4))
print("swa bn mean", round(swa_model.module[1].running_mean.double().sum().item(), 4))
