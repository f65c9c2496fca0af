"""A research-repo style Trainer for an MLP classifier: fit() builds AdamW through a Lightning-like
configure_optimizers() hook and runs epochs of self.training_step(batch) until max_steps."""
import os

import torch
import torch.nn.functional as F
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class MLPClassifier(nn.Module):
    def __init__(self, d_in=128, hidden=512, depth=4, n_classes=20, p=0.1):
        super().__init__()
        layers, width = [], d_in
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.GELU(), nn.Dropout(p)]
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.head(self.body(x))


class Trainer:
    def __init__(self, model, train_batches, lr=1e-3, weight_decay=0.05, log_every=100):
        self.model = model
        self.train_batches = train_batches
        self.lr = lr
        self.weight_decay = weight_decay
        self.log_every = log_every
        self.optimizer = None

    def configure_optimizers(self):
        decay = [p for n, p in self.model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in self.model.named_parameters() if p.ndim < 2]
        groups = [{"params": decay, "weight_decay": self.weight_decay},
                  {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.lr, betas=(0.9, 0.95))

    def training_step(self, batch):
        x, y = batch
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        loss.backward()
        self.optimizer.step()
        return loss

    def fit(self, max_steps):
        self.optimizer = self.configure_optimizers()
        self.model.train()
        step, epoch = 0, 0
        while step < max_steps:
            running = torch.zeros((), device=device)
            seen = 0
            for batch in self.train_batches:
                loss = self.training_step(batch)
                running += loss.detach()
                seen += 1
                step += 1
                if step % self.log_every == 0:
                    print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
                if step >= max_steps:
                    break
            print(f"epoch {epoch} mean train loss {(running / seen).item():.4f}")
            epoch += 1


def make_batches(n_batches=40, batch_size=256, d_in=128, n_classes=20):
    proj = torch.randn(d_in, n_classes, device=device)
    batches = []
    for _ in range(n_batches):
        x = torch.randn(batch_size, d_in, device=device)
        y = (x @ proj + 0.5 * torch.randn(batch_size, n_classes, device=device)).argmax(-1)
        batches.append((x, y))
    return batches


def main():
    torch.manual_seed(0)
    steps = int(os.environ.get("CG_STEPS", "600"))
    model = MLPClassifier().to(device)
    trainer = Trainer(model, make_batches())
    trainer.fit(max_steps=steps)
    print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))


if __name__ == "__main__":
    main()
