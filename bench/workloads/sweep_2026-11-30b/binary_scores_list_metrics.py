# binary classifier whose loop keeps each batch's positive-class scores (out[:, 1]) and labels for epoch-end metrics
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
w = torch.randn(10, device=device)
features = torch.randn(30, 64, 10, device=device)
targets = (features @ w + 0.5 * torch.randn(30, 64, device=device) > 0).long()

for epoch in range(3):
    scores, labels = [], []
    for x, y in zip(features, targets):
        optimizer.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        scores.append(out[:, 1].detach())
        labels.append(y)
    s, t = torch.cat(scores), torch.cat(labels)
    pos, neg = s[t == 1], s[t == 0]
    auc = (pos[:, None] > neg[None, :]).float().mean().item()
    print(f"epoch {epoch} loss {loss.item():.4f} auc {auc:.4f} mean score {s.mean().item():.4f}")
