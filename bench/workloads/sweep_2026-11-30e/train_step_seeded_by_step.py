# `def train_step(batch, step):` handed the Python step counter, which seeds torch.manual_seed(seed + step) for reproducible per-step noise; the loop samples its batch with the CPU generator after
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"
seed = 1234

model = nn.Sequential(nn.Linear(32, 96), nn.ReLU(), nn.Dropout(0.2), nn.Linear(96, 96), nn.ReLU(), nn.Linear(96, 32)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)

N = 2048
dataset_x = torch.randn(N, 32, device=device)
dataset_y = torch.roll(dataset_x, 1, dims=-1)


def train_step(batch, step):
    torch.manual_seed(seed + step)   # the same noise for a given step, whatever ran before
    x, y = batch
    x = x + 0.05 * torch.randn_like(x)
    optimizer.zero_grad()
    loss = F.smooth_l1_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


idx = torch.randint(0, N, (64,))
history = []
for step in range(400):
    batch = (dataset_x[idx.to(device)], dataset_y[idx.to(device)])
    loss = train_step(batch, step)
    idx = torch.randint(0, N, (64,))     # the next batch, drawn from the generator train_step seeded
    if step % 100 == 0:
        history.append(round(loss.item(), 4))
        print(f"step {step} loss {loss.item():.4f} next idx sum {int(idx.sum())}")

print("history", history)
print("final loss", round(loss.item(), 4), "last idx sum", int(idx.sum()))
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
