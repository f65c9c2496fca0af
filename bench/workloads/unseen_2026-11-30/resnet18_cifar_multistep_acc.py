"""A ResNet-18-ish CIFAR-10 training (BasicBlock class, _make_layer, three stages of two blocks, 32x32 inputs, batch 128): SGD momentum 0.9 without Nesterov and weight decay 5e-4, MultiStepLR stepped once per epoch, correct predictions accumulated in a device tensor and read with .item() once per epoch."""
import math
import os

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, num_blocks=(2, 2, 2), widths=(32, 64, 128), num_classes=10):
        super().__init__()
        self.in_planes = widths[0]
        self.conv1 = nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.layer1 = self._make_layer(widths[0], num_blocks[0], 1)
        self.layer2 = self._make_layer(widths[1], num_blocks[1], 2)
        self.layer3 = self._make_layer(widths[2], num_blocks[2], 2)
        self.linear = nn.Linear(widths[2], num_classes)

    def _make_layer(self, planes, n, stride):
        layers = []
        for s in [stride] + [1] * (n - 1):
            layers.append(BasicBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.layer3(self.layer2(self.layer1(F.relu(self.bn1(self.conv1(x))))))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
batch_size, batches_per_epoch = 128, 5
epochs = math.ceil(steps / batches_per_epoch)
images = torch.randn(batches_per_epoch, batch_size, 3, 32, 32, device=device)
labels = torch.randint(0, 10, (batches_per_epoch, batch_size), device=device)

net = ResNet().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=False, weight_decay=5e-4)
scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[epochs // 2, epochs * 3 // 4], gamma=0.1)

step = 0
for epoch in range(epochs):
    net.train()
    correct = torch.zeros((), dtype=torch.long, device=device)
    seen = 0
    for i in range(min(batches_per_epoch, steps - step)):
        inputs, targets = images[i], labels[i]
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        correct += (outputs.argmax(1) == targets).sum()
        seen += targets.size(0)
        step += 1
    scheduler.step()
    print(f"epoch {epoch} acc {100.0 * correct.item() / seen:.2f} lr {scheduler.get_last_lr()[0]:.4f}")

print(f"final loss {loss.item():.6f}")
