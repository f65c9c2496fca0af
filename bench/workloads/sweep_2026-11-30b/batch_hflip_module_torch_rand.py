# torchvision-style RandomHorizontalFlip module (`if torch.rand(1) < self.p`) applied to the GPU batch in the step
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class RandomHorizontalFlip(nn.Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, img):
        if torch.rand(1) < self.p:
            return img.flip(-1)
        return img


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


flip = RandomHorizontalFlip()
model = SmallCNN().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
# left/right asymmetric images: the flip changes what the model sees
images = torch.randn(20, 32, 3, 16, 16, device=device) + torch.linspace(-1, 1, 16, device=device)
labels = torch.randint(0, 10, (20, 32), device=device)

for epoch in range(3):
    model.train()
    total = 0.0
    for i in range(20):
        x, y = images[i], labels[i]
        optimizer.zero_grad()
        x = flip(x)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    print(f"epoch {epoch} mean loss {total / 20:.4f}")
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 4))
