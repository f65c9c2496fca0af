"""A small U-Net trained for segmentation with binary cross-entropy plus a Dice loss."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


def block(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True),
                         nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down1, self.down2, self.bottom = block(1, 8), block(8, 16), block(16, 32)
        self.up2, self.dec2 = nn.ConvTranspose2d(32, 16, 2, stride=2), block(32, 16)
        self.up1, self.dec1 = nn.ConvTranspose2d(16, 8, 2, stride=2), block(16, 8)
        self.head = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        b = self.bottom(F.max_pool2d(d2, 2))
        u2 = self.dec2(torch.cat([self.up2(b), d2], dim=1))
        u1 = self.dec1(torch.cat([self.up1(u2), d1], dim=1))
        return self.head(u1)


def dice_loss(logits, mask, eps=1.0):
    probs = torch.sigmoid(logits)
    intersection = (probs * mask).sum(dim=(1, 2, 3))
    union = probs.sum(dim=(1, 2, 3)) + mask.sum(dim=(1, 2, 3))
    return (1 - (2 * intersection + eps) / (union + eps)).mean()


model = UNet().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [(torch.rand(8, 1, 32, 32), (torch.rand(8, 1, 32, 32) > 0.7).float()) for _ in range(steps)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step, (image, mask) in enumerate(data):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    image, mask = image.to(device), mask.to(device)
    logits = _cg_compiled_model(image)
    loss = F.binary_cross_entropy_with_logits(logits, mask) + dice_loss(logits, mask)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
