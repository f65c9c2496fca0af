# CNN step function: uint8-ish images scaled with /= and standardised by a helper of the script
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


def standardize_(t):
    # per-sample standardisation, in place to save memory
    t.sub_(t.mean(dim=(1, 2, 3), keepdim=True))
    t.div_(t.std(dim=(1, 2, 3), keepdim=True) + 1e-6)
    return t


def train_step(model, optimizer, images, targets):
    images /= 255.0
    standardize_(images)
    optimizer.zero_grad()
    out = model(images)
    loss = F.cross_entropy(out, targets)
    loss.backward()
    optimizer.step()
    return loss


model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(16, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
dataset = [(torch.randint(0, 256, (16, 3, 16, 16), device=device).float(),
            torch.randint(0, 10, (16,), device=device)) for _ in range(12)]
history = []
for _epoch in range(2):
    for images, targets in dataset:
        loss = train_step(model, optimizer, images, targets)
        history.append(loss.item())
print("mean loss", sum(history) / len(history))
print("pixel range", dataset[0][0].min().item(), dataset[0][0].max().item())
