"""Fine-tuning as the transfer-learning tutorials write it: the backbone frozen for the first
epoch (only the new head trains), then unfrozen with a lower learning rate."""
import os
import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
backbone = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU()).to(device)
head = nn.Linear(128, 10).to(device)
model = nn.Sequential(backbone, head)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = [(torch.randn(32, 64, device=device), torch.randint(0, 10, (32,), device=device)) for _ in range(20)]

for p in backbone.parameters():
    p.requires_grad = False
epochs = steps // len(data)
for epoch in range(epochs):
    if epoch == 1:
        for p in backbone.parameters():
            p.requires_grad = True
    for x, y in data:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
