"""The PyTorch Siamese-network example's loop: one tower applied to two images, their features
concatenated and scored by a head with a sigmoid, BCELoss, Adadelta, and a StepLR scheduler
stepped once per epoch after the training function returns."""
import os

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.tower = nn.Sequential(
            nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.fc = nn.Sequential(nn.Linear(32 * 16 * 2, 128), nn.ReLU(inplace=True), nn.Linear(128, 1))
        self.sigmoid = nn.Sigmoid()

    def forward_once(self, x):
        return self.tower(x)

    def forward(self, input1, input2):
        output = torch.cat((self.forward_once(input1), self.forward_once(input2)), 1)
        return self.sigmoid(self.fc(output))


def train(model, device, train_loader, optimizer, epoch, log_interval=50):
    model.train()
    criterion = nn.BCELoss()
    for batch_idx, (images_1, images_2, targets) in enumerate(train_loader):
        images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx}/{len(train_loader)}]\tLoss: {loss.item():.6f}")


def main():
    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    steps = int(os.environ.get("CG_STEPS", "200"))
    train_loader = [(torch.randn(16, 1, 28, 28), torch.randn(16, 1, 28, 28), torch.randint(0, 2, (16,)).float())
                    for _ in range(steps)]
    model = SiameseNetwork().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    for epoch in range(1, 2):
        train(model, device, train_loader, optimizer, epoch)
        scheduler.step()
    print(f"final lr {scheduler.get_last_lr()[0]:.4f}")


if __name__ == "__main__":
    main()
