"""A denoising autoencoder as in the tutorials: MNIST-shaped images from a DataLoader, moved
to the GPU and flattened, Gaussian noise added and clamped there, an MLP encoder and decoder,
MSE against the clean images, Adam; the epoch's loss summed with loss.item()."""
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
epochs, batch_size, noise_factor = 5, 128, 0.3
per_epoch = max(steps // epochs, 1)
dataset = TensorDataset(torch.rand(per_epoch * batch_size, 1, 28, 28))
loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)


class DenoisingAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 784), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


model = DenoisingAutoencoder().to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(epochs):
    running = 0.0
    for (images,) in loader:
        images = images.to(device).view(images.size(0), -1)
        noisy = images + noise_factor * torch.randn_like(images)
        noisy = torch.clamp(noisy, 0.0, 1.0)
        outputs = model(noisy)
        loss = criterion(outputs, images)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    print(f"epoch {epoch} loss {running / len(loader):.6f}")

print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
