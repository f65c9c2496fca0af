"""A CIFAR-style image-classification Trainer as in many research repos: a small CNN, SGD with
momentum and weight decay, train_epoch() drawing (x, y) pairs and calling self.train_step(x, y)."""
import os

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


def conv_bn(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True))


class SmallConvNet(nn.Module):
    def __init__(self, n_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(3, 32), conv_bn(32, 32), nn.MaxPool2d(2),
            conv_bn(32, 64), conv_bn(64, 64), nn.MaxPool2d(2),
            conv_bn(64, 128), nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(128, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class Trainer:
    def __init__(self, model, lr=0.05, momentum=0.9, weight_decay=5e-4):
        self.model = model
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum,
                                         weight_decay=weight_decay, nesterov=True)

    def train_step(self, x, y):
        self.optimizer.zero_grad()
        out = self.model(x)
        loss = self.criterion(out, y)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def train_epoch(self, images, labels, epoch, steps_left):
        self.model.train()
        total = torch.zeros((), device=device)
        n = min(len(images), steps_left)
        for i in range(n):
            total += self.train_step(images[i], labels[i])
            if (i + 1) % 100 == 0:
                print(f"epoch {epoch} iter {i + 1} running loss {(total / (i + 1)).item():.4f}")
        print(f"epoch {epoch} done, mean loss {(total / max(n, 1)).item():.4f}")
        return n


def main():
    torch.manual_seed(0)
    steps = int(os.environ.get("CG_STEPS", "600"))
    n_batches, batch_size = 50, 128
    images = torch.randn(n_batches, batch_size, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (n_batches, batch_size), device=device)
    images[:, :, 0] += labels[..., None, None].float() * 0.1  # a learnable signal in one channel
    model = SmallConvNet().to(device)
    trainer = Trainer(model)
    done, epoch = 0, 0
    while done < steps:
        done += trainer.train_epoch(images, labels, epoch, steps - done)
        epoch += 1
    print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))


if __name__ == "__main__":
    main()
