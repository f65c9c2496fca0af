# Exponentially smoothed loss, bound in a conditional expression on the first step
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
xs = torch.randn(30, 128, 16, device=device)
ys = torch.randn(30, 128, 1, device=device)
smooth = None
for epoch in range(4):
    for i in range(30):
        optimizer.zero_grad()
        loss = F.mse_loss(model(xs[i]), ys[i])
        loss.backward()
        optimizer.step()
        smooth = loss.detach() if smooth is None else 0.9 * smooth + 0.1 * loss.detach()
    print(epoch, round(smooth.item(), 6))
