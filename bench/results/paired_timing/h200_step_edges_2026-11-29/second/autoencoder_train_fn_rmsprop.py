"""An autoencoder tutorial: a tiny Linear encoder/decoder, MSE reconstruction, RMSprop, the loop inside a train(model, opt, data, epochs) function called under a __main__ guard."""
import os

import torch
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self, in_dim=32, code_dim=8):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, 16), nn.ReLU(), nn.Linear(16, code_dim))
        self.decoder = nn.Sequential(nn.Linear(code_dim, 16), nn.ReLU(), nn.Linear(16, in_dim))

    def forward(self, x):
        return self.decoder(self.encoder(x))


def train(model, opt, data, epochs):
    criterion = nn.MSELoss()
    for epoch in range(epochs):
        for x in data:
            opt.zero_grad()
            recon = model(x)
            loss = criterion(recon, x)
            loss.backward()
            opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")
    return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = int(os.environ.get("CG_STEPS", "600"))
    epochs, batch_size, in_dim = 3, 32, 32
    per_epoch = max(1, steps // epochs)
    basis = torch.randn(4, in_dim, device=device)
    data = torch.randn(per_epoch, batch_size, 4, device=device) @ basis
    model = AutoEncoder(in_dim).to(device)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    loss = train(model, opt, data, epochs)
    print(f"final loss {loss.item():.6f}")
