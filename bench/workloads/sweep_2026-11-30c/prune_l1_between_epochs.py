# PyTorch pruning tutorial shape: iterative magnitude pruning, prune.l1_unstructured on each Linear between epochs
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.utils.prune as prune

torch.manual_seed(0)
device = "cuda"


class LeNetFC(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 64)
        self.fc3 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


model = LeNetFC().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
criterion = nn.CrossEntropyLoss()
xs = torch.randn(20, 64, 64, device=device)
ys = torch.randint(0, 10, (20, 64), device=device)

for epoch in range(3):
    model.train()
    total = 0.0
    for x, y in zip(xs, ys):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch} mean loss {total / len(xs):.5f}")
    # prune 30% of the remaining weights of each layer after every epoch
    for module in (model.fc1, model.fc2, model.fc3):
        prune.l1_unstructured(module, name="weight", amount=0.3)

zeros = sum(int((m.weight == 0).sum()) for m in (model.fc1, model.fc2, model.fc3))
with torch.no_grad():
    final = criterion(model(xs[0]), ys[0]).item()
print("zeros", zeros, "final loss", round(final, 5))
print("weight_orig sum", round(sum(m.weight_orig.sum().item() for m in (model.fc1, model.fc2, model.fc3)), 4))
