# Mean Teacher (Tarvainen & Valpola) main.py shape: ema_model kept in train() and run under no_grad, EMA after the step
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


def create_model(ema=False):
    net = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    if ema:
        for param in net.parameters():
            param.detach_()
    return net


def update_ema_variables(model, ema_model, alpha, global_step):
    alpha = min(1 - 1 / (global_step + 1), alpha)
    with torch.no_grad():
        for ema_param, param in zip(ema_model.parameters(), model.parameters()):
            ema_param.mul_(alpha).add_(param, alpha=1 - alpha)


model = create_model()
ema_model = create_model(ema=True)
ema_model.load_state_dict(copy.deepcopy(model.state_dict()))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
xs = torch.randn(20, 64, 16, device=device) + 0.5
ys = torch.randint(0, 4, (20, 64), device=device)
consistency_weight = 2.0
global_step = 0

for epoch in range(3):
    model.train()
    ema_model.train()
    for x, y in zip(xs, ys):
        noisy = x + 0.1 * torch.randn_like(x)
        logits = model(x)
        with torch.no_grad():
            ema_logits = ema_model(noisy)
        class_loss = F.cross_entropy(logits, y)
        consistency_loss = F.mse_loss(F.softmax(logits, 1), F.softmax(ema_logits, 1))
        loss = class_loss + consistency_weight * consistency_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
        update_ema_variables(model, ema_model, 0.99, global_step)
    print(f"epoch {epoch} loss {loss.item():.4f}")

ema_model.eval()
with torch.no_grad():
    ema_acc = (ema_model(xs[0]).argmax(1) == ys[0]).float().mean().item()
print("ema acc", round(ema_acc, 4), "ema bn batches", ema_model[1].num_batches_tracked.item(),
      "ema running_mean", round(ema_model[1].running_mean.sum().item(), 5))
