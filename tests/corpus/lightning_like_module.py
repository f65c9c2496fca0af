"""A PyTorch Lightning-style LightningModule without Lightning: training_step(batch, batch_idx)
returns the loss, configure_optimizers() returns (optimizer, scheduler), self.log() keeps the
detached values in a dict, and a small generic fit() plays the Trainer: zero_grad, the module's
training_step, backward, step, and the scheduler stepped once per epoch."""
import os

import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class LitClassifier(nn.Module):
    def __init__(self, in_dim=32, hidden=128, num_classes=5, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
        self.logged_metrics = {}

    def log(self, name, value):
        self.logged_metrics[name] = value.detach()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(dim=-1) == y).float().mean()
        self.log("train_loss", loss)
        self.log("train_acc", acc)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=0.01)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return optimizer, scheduler


def fit(module, loader, max_epochs, device):
    module.to(device)
    opt, sched = module.configure_optimizers()
    for epoch in range(max_epochs):
        module.train()
        for i, batch in enumerate(loader):
            batch = [t.to(device) for t in batch]
            opt.zero_grad()
            loss = module.training_step(batch, i)
            loss.backward()
            opt.step()
        sched.step()
        print(f"epoch {epoch} train_loss {module.logged_metrics['train_loss'].item():.4f} "
              f"train_acc {module.logged_metrics['train_acc'].item():.3f}")
    return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = int(os.environ.get("CG_STEPS", "200"))
    dataset = TensorDataset(torch.randn(20 * 32, 32), torch.randint(0, 5, (20 * 32,)))
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    model = LitClassifier()
    loss = fit(model, loader, max_epochs=max(1, steps // len(loader)), device=device)
    print(f"final loss {loss.item():.6f}")
    print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
