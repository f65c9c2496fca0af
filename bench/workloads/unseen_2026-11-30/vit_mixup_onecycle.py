"""A ViT-lite CIFAR classifier as in the many "ViT from scratch on CIFAR-10" repos: Conv2d patch embedding (stride = patch), a cls token and learned positions, nn.TransformerEncoder (batch_first, norm_first, 4 layers, d_model 192), AdamW, OneCycleLR stepped every batch, label smoothing, mixup with a Beta-distributed lambda drawn on the host each step and a device randperm."""
import os

import torch
import torch.nn.functional as F
from torch import nn


class ViT(nn.Module):
    def __init__(self, image_size=32, patch=4, dim=192, depth=4, heads=3, num_classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, (image_size // patch) ** 2 + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.1, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.size(0), -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.encoder(x))[:, 0])


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
bank, batch_size = 8, 32
images = torch.randn(bank, batch_size, 3, 32, 32, device=device)
labels = torch.randint(0, 10, (bank, batch_size), device=device)
beta = torch.distributions.Beta(torch.tensor(0.8), torch.tensor(0.8))

model = ViT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=steps, pct_start=0.2)

model.train()
for step in range(steps):
    x, y = images[step % bank], labels[step % bank]
    lam = beta.sample().item()
    index = torch.randperm(x.size(0), device=device)
    mixed = lam * x + (1 - lam) * x[index]
    out = model(mixed)
    loss = lam * F.cross_entropy(out, y, label_smoothing=0.1) + (1 - lam) * F.cross_entropy(out, y[index], label_smoothing=0.1)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")

print(f"final loss {loss.item():.6f}")
