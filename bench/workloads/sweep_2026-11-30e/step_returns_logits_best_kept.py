# a step function returning (loss, logits, acc tensor); the loop keeps the logits of the best batch and sums the acc tensors
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, 4)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

X = torch.randn(60, 40, 12, device=device)
Y = (X[..., 0] > 0).long() + 2 * (X[..., 1] > 0).long()


def train_step(x, y):
    model.train()
    optimizer.zero_grad()
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    acc = (logits.argmax(dim=1) == y).float().mean()
    return loss, logits.detach(), acc


best_loss = float("inf")
best_logits = None
best_at = -1
acc_sum = torch.zeros((), device=device)
n = 0
for epoch in range(4):
    for i in range(X.size(0)):
        loss, logits, acc = train_step(X[i], Y[i])
        acc_sum += acc
        n += 1
        if loss.item() < best_loss:
            best_loss = loss.item()
            best_logits = logits
            best_at = n
    print(f"epoch {epoch} loss {loss.item():.4f} mean acc {(acc_sum / n).item():.4f}")

print("best loss", round(best_loss, 4), "at", best_at, "best logits sum", round(best_logits.double().sum().item(), 4))
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
