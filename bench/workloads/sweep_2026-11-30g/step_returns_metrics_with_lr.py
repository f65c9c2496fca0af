# Trainer whose train_step returns a dict of metrics (loss, accuracy, grad norm) plus the current lr read from the optimizer; loop logs and keeps the last
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


class Trainer:
    def __init__(self, model, optimizer, clip=1.0):
        self.model = model
        self.optimizer = optimizer
        self.loss_fn = nn.CrossEntropyLoss()
        self.clip = clip

    def train_step(self, x, y):
        logits = self.model(x)
        loss = self.loss_fn(logits, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
        self.optimizer.step()
        with torch.no_grad():
            acc = (logits.argmax(1) == y).float().mean()
        return {"loss": loss.detach(), "acc": acc, "grad_norm": gnorm, "lr": self.optimizer.param_groups[0]["lr"]}

    def fit(self, data, epochs):
        for epoch in range(epochs):
            sums = {"loss": 0.0, "acc": 0.0}
            for x, y in data:
                metrics = self.train_step(x, y)
                sums["loss"] += metrics["loss"].item()
                sums["acc"] += metrics["acc"].item()
            print(f"epoch {epoch} loss {sums['loss'] / len(data):.4f} acc {sums['acc'] / len(data):.4f} "
                  f"lr {metrics['lr']:.1e} gnorm {metrics['grad_norm'].item():.4f}")
        return metrics


xs = torch.randn(24, 64, 20, device=device)
ys = (xs[..., 0] * xs[..., 1] > 0).long() + (xs[..., 2] > 1).long()
data = list(zip(xs, ys))
model = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3)).to(device)
trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=3e-3))
last = trainer.fit(data, epochs=5)

print(f"final loss {last['loss'].item():.4f} acc {last['acc'].item():.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
