import os

import torch
from torch import nn


def train(model, optimizer, steps, device):
    x, y = torch.randn(64, 8, device=device), torch.randint(0, 4, (64,), device=device)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    final = train(net, opt, int(os.environ.get("CG_STEPS", "200")), device)
    print(f"final loss {final.item():.6f}")
