"""A U-Net-lite segmentation training in the shape of milesial/Pytorch-UNet (DoubleConv blocks, MaxPool downs, Up blocks with bilinear upsampling and skip concatenation, a 1x1 OutConv; 64x64 images, 2 classes, base width 32, batch 8): BCEWithLogits on one-hot masks plus a soft Dice loss, float16 torch.autocast with a GradScaler (both enabled only on CUDA), unscale_ + clip_grad_norm_, Adam."""
import os

import torch
import torch.nn.functional as F
from torch import nn


class DoubleConv(nn.Sequential):
    def __init__(self, c_in, c_out, c_mid=None):
        c_mid = c_mid or c_out
        super().__init__(nn.Conv2d(c_in, c_mid, 3, padding=1, bias=False), nn.BatchNorm2d(c_mid), nn.ReLU(inplace=True),
                         nn.Conv2d(c_mid, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class Up(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = DoubleConv(c_in, c_out, c_in // 2)

    def forward(self, x, skip):
        return self.conv(torch.cat([skip, self.up(x)], dim=1))


def down(c_in, c_out):
    return nn.Sequential(nn.MaxPool2d(2), DoubleConv(c_in, c_out))


class UNet(nn.Module):
    def __init__(self, n_channels=3, n_classes=2, w=32):
        super().__init__()
        self.inc = DoubleConv(n_channels, w)
        self.down1, self.down2, self.down3 = down(w, 2 * w), down(2 * w, 4 * w), down(4 * w, 4 * w)
        self.up1, self.up2, self.up3 = Up(8 * w, 2 * w), Up(4 * w, w), Up(2 * w, w)
        self.outc = nn.Conv2d(w, n_classes, 1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        return self.outc(self.up3(self.up2(self.up1(self.down3(x3), x3), x2), x1))


def dice_loss(logits, target, eps=1e-6):
    probs = torch.sigmoid(logits.float())
    inter = (probs * target).sum(dim=(2, 3))
    union = probs.sum(dim=(2, 3)) + target.sum(dim=(2, 3))
    return 1 - ((2 * inter + eps) / (union + eps)).mean()


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
amp = device == "cuda"
bank, batch_size = 8, 8
images = torch.randn(bank, batch_size, 3, 64, 64, device=device)
fg = (F.avg_pool2d(images[:, :, 0], 5, stride=1, padding=2) > 0.1).long()
masks = F.one_hot(fg, 2).permute(0, 1, 4, 2, 3).float()

model = UNet().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion, scaler = nn.BCEWithLogitsLoss(), torch.amp.GradScaler("cuda", enabled=amp)

model.train()
for step in range(steps):
    x, y = images[step % bank], masks[step % bank]
    with torch.autocast(device_type=device, dtype=torch.float16, enabled=amp):
        logits = model(x)
        loss = criterion(logits, y) + dice_loss(logits, y)
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
