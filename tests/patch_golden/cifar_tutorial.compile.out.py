"""The PyTorch CIFAR-10 tutorial: a running loss summed with loss.item() after the step and
printed every 50 mini-batches, inside an epoch loop; inputs unpacked from `data`."""
import os

import torch
import torch.nn.functional as F
from torch import nn, optim


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


torch.manual_seed(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
net = Net().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
trainloader = [(torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))) for _ in range(int(os.environ.get("CG_STEPS", "200")))]

_cg_compiled_net = torch.compile(net, mode="reduce-overhead")  # cg-advise: scope compile

for epoch in range(1):
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        inputs, labels = data[0].to(device), data[1].to(device)
        optimizer.zero_grad()
        outputs = _cg_compiled_net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        if i % 50 == 49:
            print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 50:.3f}")
            running_loss = 0.0

print("Finished Training")
