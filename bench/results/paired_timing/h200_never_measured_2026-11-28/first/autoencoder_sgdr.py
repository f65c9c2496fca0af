"""A dense autoencoder on flattened 28x28 images (784-256-64-256-784, Sigmoid output), MSELoss
and Adam, with CosineAnnealingWarmRestarts stepped every batch at a fractional epoch as its
documentation shows (scheduler.step(epoch + i / iters)), the loss logged every 20 steps."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
epochs, batch_size = 4, 128
iters = steps // epochs


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU())
        self.decoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 784), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


model = AutoEncoder().to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=1, T_mult=2, eta_min=1e-5)
images = torch.rand(iters, batch_size, 1, 28, 28)

step = 0
for epoch in range(epochs):
    for i, img in enumerate(images):
        img = img.view(img.size(0), -1).to(device)
        output = model(img)
        loss = criterion(output, img)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step(epoch + i / iters)
        if step % 20 == 0:
            print(f"epoch {epoch} step {step} lr {scheduler.get_last_lr()[0]:.6f} loss {loss.item():.6f}")
        step += 1

checksum = sum(p.double().sum().item() for p in model.parameters())
print(f"final loss {loss.item():.6f} checksum {checksum:.6f}")
