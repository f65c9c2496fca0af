# a model whose residual trunk is wrapped by torch.compile inside its __init__ (self.blocks = torch.compile(...)); plain eager loop outside
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, dim=64, depth=3, num_classes=10):
        super().__init__()
        self.stem = nn.Linear(32, dim)
        self.blocks = torch.compile(nn.Sequential(*[Block(dim) for _ in range(depth)]))
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


train_x = torch.randn(40, 64, 32, device=device)
train_y = (train_x[..., :4].sum(-1) > 0).long() + 2 * (train_x[..., 4] > 0).long()

model = Net().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(5):
    model.train()
    epoch_loss = 0.0
    for x, y in zip(train_x, train_y):
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
    print(f"epoch {epoch} loss {epoch_loss / len(train_x):.4f}")

print(f"final loss {loss.item():.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
