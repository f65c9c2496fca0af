"""An nn.Module tutorial: a small MLP regressor written as a subclass with an explicit forward (Linear-Tanh-Linear-Tanh-Linear), MSELoss, Adamax, the whole training loop inside main() called under a __main__ guard."""
import os

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, in_dim, hidden, out_dim):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out_dim)

    def forward(self, x):
        x = torch.tanh(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.fc3(x)


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = int(os.environ.get("CG_STEPS", "600"))
    bank, batch_size, in_dim, hidden, out_dim = 24, 32, 12, 48, 2
    inputs = torch.randn(bank, batch_size, in_dim, device=device)
    proj = torch.randn(in_dim, out_dim, device=device) / in_dim ** 0.5
    targets = torch.tanh(inputs @ proj) + 0.1 * inputs[..., :out_dim] ** 2
    model = Net(in_dim, hidden, out_dim).to(device)
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adamax(model.parameters(), lr=2e-3)

    for step in range(steps):
        x = inputs[step % bank]
        y = targets[step % bank]
        optimizer.zero_grad()
        output = model(x)
        loss = criterion(output, y)
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")

    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
