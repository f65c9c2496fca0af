# FGSM adversarial training: the batch is marked to require grad before the step
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 5)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
epsilon = 0.05
batches = [(torch.randn(64, 32), torch.randint(0, 5, (64,))) for _ in range(20)]
for epoch in range(3):
    for images, labels in batches:
        images, labels = images.to(device), labels.to(device)
        images.requires_grad_(True)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        adversarial = (images + epsilon * images.grad.sign()).detach()
        optimizer.zero_grad()
        adv_loss = F.cross_entropy(model(adversarial), labels)
        adv_loss.backward()
        optimizer.step()
    print(epoch, adv_loss.item())
