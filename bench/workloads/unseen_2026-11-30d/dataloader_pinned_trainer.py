"""A hand-written Lightning-like Trainer fed by a torch.utils.data.DataLoader over a CPU TensorDataset
(pin_memory=True): fit() moves each batch with .to(device, non_blocking=True), then calls self.training_step."""
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"


class TabularNet(nn.Module):
    def __init__(self, n_features=64, hidden=384, n_blocks=3, n_classes=8):
        super().__init__()
        self.stem = nn.Linear(n_features, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.Dropout(0.1))
            for _ in range(n_blocks))
        self.head = nn.Sequential(nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = h + block(h)
        return self.head(h)


class Trainer:
    def __init__(self, model, loader, max_steps, lr=2e-3, log_every=100):
        self.model = model
        self.loader = loader
        self.max_steps = max_steps
        self.log_every = log_every
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)

    def training_step(self, batch):
        features, target = batch
        self.optimizer.zero_grad()
        loss = self.criterion(self.model(features), target)
        loss.backward()
        self.optimizer.step()
        return loss

    def fit(self):
        self.model.train()
        step = 0
        epoch = 0
        while step < self.max_steps:
            epoch_loss = torch.zeros((), device=device)
            n = 0
            for features, target in self.loader:
                features = features.to(device, non_blocking=True)
                target = target.to(device, non_blocking=True)
                loss = self.training_step((features, target))
                epoch_loss += loss.detach()
                n += 1
                step += 1
                if step % self.log_every == 0:
                    print(f"step {step} loss {loss.item():.4f}")
                if step >= self.max_steps:
                    break
            print(f"epoch {epoch} avg loss {(epoch_loss / n).item():.4f}")
            epoch += 1


def main():
    torch.manual_seed(0)
    steps = int(os.environ.get("CG_STEPS", "600"))
    n, n_features = 8192, 64
    x = torch.randn(n, n_features)
    w = torch.randn(n_features, 8)
    y = (x @ w).argmax(-1)
    loader = DataLoader(TensorDataset(x, y), batch_size=256, shuffle=True, drop_last=True, pin_memory=True)
    model = TabularNet(n_features).to(device)
    Trainer(model, loader, max_steps=steps).fit()
    print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))


if __name__ == "__main__":
    main()
