"""A custom autograd Function (a straight-through clamp with its own backward) inside the
model, trained with RMSprop."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class StraightThroughClamp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1.0, 1.0)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * (x.abs() < 2.0).to(grad.dtype)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 64), nn.Linear(64, 64), nn.Linear(64, 1)

    def forward(self, x):
        x = StraightThroughClamp.apply(self.fc1(x))
        x = StraightThroughClamp.apply(self.fc2(x))
        return self.fc3(x).squeeze(-1)


model = Net().to(device)
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
xs, ys = torch.randn(steps, 128, 16), torch.randn(steps, 128)

for step in range(steps):
    x, y = xs[step].to(device), ys[step].to(device)
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
