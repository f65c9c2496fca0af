# MLP classifier: the loop collects each step's loss tensor with losses.append(train_step(...))
# MLP classifier: the loop adds up what train_step() returns in several ways
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
xs = torch.randn(40, 64, 32, device=device)
ys = torch.randint(0, 4, (40, 64), device=device)

for epoch in range(3):
    running_loss = []
    for i in range(40):
        running_loss.append(train_step(model, optimizer, xs[i], ys[i]))
    print(epoch, sum(v.item() for v in running_loss) / 40, running_loss[0].item())
