"""A sparse-autoencoder tutorial: an MLP encoder/decoder on flattened 28x28 images from a DataLoader, MSE reconstruction plus an L1 penalty on the code, one backward, Adam, the epoch's loss summed on the host every 10 batches."""
import os

import torch
from torch import nn


class SparseAutoencoder(nn.Module):
    def __init__(self, in_dim=784, code_dim=128):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, 256), nn.ReLU(), nn.Linear(256, code_dim), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(code_dim, 256), nn.ReLU(), nn.Linear(256, in_dim), nn.Sigmoid())

    def forward(self, x):
        code = self.encoder(x)
        return self.decoder(code), code


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = int(os.environ.get("CG_STEPS", "200"))
    epochs, batch_size, l1_weight = 2, 64, 1e-3
    n = max(1, steps // epochs) * batch_size
    dataset = torch.utils.data.TensorDataset(torch.rand(n, 1, 28, 28))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True)
    model = SparseAutoencoder().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    mse = nn.MSELoss()
    for epoch in range(epochs):
        running = 0.0
        for i, (images,) in enumerate(loader):
            images = images.to(device).view(images.size(0), -1)
            optimizer.zero_grad()
            recon, code = model(images)
            loss = mse(recon, images) + l1_weight * code.abs().mean()
            loss.backward()
            optimizer.step()
            if i % 10 == 9:
                running += loss.item()
        print(f"epoch {epoch} mean logged loss {running / max(1, len(loader) // 10):.6f}")
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
