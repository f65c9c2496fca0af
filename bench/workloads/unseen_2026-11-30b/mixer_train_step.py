"""An MLP-Mixer on 32x32 images cut into 4x4 patches, trained with a step function as
functional-style code writes it: `train_step(model, optimizer, images, labels)` zeroes the
gradients, runs forward and loss (label smoothing), backward, clips the norm and steps AdamW,
returning the detached loss; `main()` picks batches from a bank on the GPU and logs every 100
steps."""
import os

import torch
import torch.nn.functional as F
from torch import nn


class MixerBlock(nn.Module):
    def __init__(self, tokens, channels, expansion=2):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(channels), nn.LayerNorm(channels)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, tokens * expansion), nn.GELU(), nn.Linear(tokens * expansion, tokens))
        self.channel_mlp = nn.Sequential(nn.Linear(channels, channels * expansion), nn.GELU(),
                                         nn.Linear(channels * expansion, channels))

    def forward(self, x):
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, patch=4, channels=128, depth=4, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, patch, stride=patch)
        self.blocks = nn.Sequential(*[MixerBlock((32 // patch) ** 2, channels) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(channels), nn.Linear(channels, classes)

    def forward(self, images):
        x = self.stem(images).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(dim=1))


def train_step(model, optimizer, images, labels):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return loss.detach()


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Mixer().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    bank_images = torch.randn(8, 64, 3, 32, 32, device=device)
    bank_labels = torch.randint(0, 10, (8, 64), device=device)
    steps = int(os.environ.get("CG_STEPS", "600"))
    for step in range(steps):
        images, labels = bank_images[step % 8], bank_labels[step % 8]
        loss = train_step(model, optimizer, images, labels)
        if step % 100 == 0:
            print(f"step {step:4d} loss {loss.item():.4f}")
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
