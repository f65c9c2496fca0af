# Prototype memory bank kept as a global tensor, updated in place inside train_step()
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


def train_step(encoder, optimizer, x, y, momentum=0.9):
    optimizer.zero_grad()
    z = F.normalize(encoder(x), dim=1)
    logits = z @ bank.t() / 0.1
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        onehot = F.one_hot(y, bank.shape[0]).float()
        centroids = onehot.t() @ z / onehot.sum(0).clamp(min=1).unsqueeze(1)
        bank.mul_(momentum).add_(centroids, alpha=1 - momentum)
        bank.copy_(F.normalize(bank, dim=1))
    return loss


encoder = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 16)).to(device)
optimizer = torch.optim.SGD(encoder.parameters(), lr=0.05, momentum=0.9)
bank = F.normalize(torch.randn(5, 16, device=device), dim=1)
X = torch.randn(50, 32, 30, device=device)
Y = torch.randint(0, 5, (50, 32), device=device)
for epoch in range(4):
    epoch_loss = torch.zeros((), device=device)
    for i in range(50):
        epoch_loss += train_step(encoder, optimizer, X[i], Y[i])
    print(f"epoch {epoch}: {epoch_loss.item() / 50:.4f}")
print("bank", bank.sum().item())
