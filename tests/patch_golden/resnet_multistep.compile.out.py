"""kuangliu/pytorch-cifar's train(): a small ResNet of BasicBlocks with BatchNorm, a DataLoader
over a CPU TensorDataset with pinned memory and non_blocking copies, SGD with Nesterov momentum
and weight decay, MultiStepLR stepped once an epoch, and per batch train_loss += loss.item()
and correct += predicted.eq(targets).sum().item()."""
import os

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layers = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 32, stride=2), BasicBlock(32, 32, stride=2))
        self.linear = nn.Linear(32, num_classes)

    def forward(self, x):
        out = self.layers(F.relu(self.bn1(self.conv1(x))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
epochs, batch_size = 4, 64
steps = int(os.environ.get("CG_STEPS", "200"))
dataset = TensorDataset(torch.randn(steps // epochs * batch_size, 3, 32, 32), torch.randint(0, 10, (steps // epochs * batch_size,)))
trainloader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=0, pin_memory=True)

net = ResNet().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.1)

_cg_compiled_net = torch.compile(net, mode="reduce-overhead")  # cg-advise: scope compile

for epoch in range(epochs):
    net.train()
    train_loss, correct, total = 0.0, 0, 0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        inputs, targets = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        optimizer.zero_grad()
        outputs = _cg_compiled_net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        _, predicted = outputs.max(1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()
    scheduler.step()
    print(f"epoch {epoch} loss {train_loss / (batch_idx + 1):.6f} acc {100.0 * correct / total:.3f}")

checksum = sum(p.double().sum().item() for p in net.parameters())
print(f"final loss {loss.item():.6f} checksum {checksum:.6f}")
