"""A CIFAR-10 speed-run style small ResNet (conv-bn-relu stem, residual blocks, 32x32 inputs), SGD with Nesterov momentum and weight decay, label smoothing, CosineAnnealingLR stepped every batch."""
import os

import torch
import torch.nn.functional as F
from torch import nn


def conv_bn(c_in, c_out, stride=1):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.body = nn.Sequential(conv_bn(c, c), conv_bn(c, c))

    def forward(self, x):
        return x + self.body(x)


def make_model(num_classes=10):
    return nn.Sequential(
        conv_bn(3, 16), conv_bn(16, 32), nn.MaxPool2d(2), Residual(32),
        conv_bn(32, 64), nn.MaxPool2d(2), Residual(64),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = int(os.environ.get("CG_STEPS", "200"))
    images = torch.randn(16, 32, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (16, 32), device=device)
    model = make_model().to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    model.train()
    for step in range(steps):
        x, y = images[step % 16], labels[step % 16]
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        optimizer.step()
        scheduler.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
