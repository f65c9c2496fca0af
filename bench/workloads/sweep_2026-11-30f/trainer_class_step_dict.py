# a Trainer class whose loop calls self.train_step(batch), which returns a dict of tensors; logged via .item() every N steps, kept per epoch
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


class Trainer:
    def __init__(self, model, optimizer, log_every=25, max_grad_norm=1.0):
        self.model = model
        self.optimizer = optimizer
        self.criterion = nn.CrossEntropyLoss()
        self.log_every = log_every
        self.max_grad_norm = max_grad_norm
        self.global_step = 0
        self.history = []

    def train_step(self, batch):
        x, y = batch
        logits = self.model(x)
        loss = self.criterion(logits, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        acc = (logits.argmax(-1) == y).float().mean()
        return {"loss": loss.detach(), "acc": acc, "grad_norm": grad_norm}

    def fit(self, batches, epochs):
        for epoch in range(epochs):
            self.model.train()
            outputs = []
            for batch in batches:
                metrics = self.train_step(batch)
                outputs.append(metrics)
                self.global_step += 1
                if self.global_step % self.log_every == 0:
                    logs = {k: v.item() for k, v in metrics.items()}
                    print(f"step {self.global_step} " + " ".join(f"{k}={v:.4f}" for k, v in logs.items()))
            epoch_loss = torch.stack([o["loss"] for o in outputs]).mean().item()
            epoch_acc = torch.stack([o["acc"] for o in outputs]).mean().item()
            self.history.append((epoch_loss, epoch_acc))
            print(f"epoch {epoch} loss {epoch_loss:.4f} acc {epoch_acc:.4f}")
        return metrics


train_x = torch.randn(40, 32, 24, device=device)
train_y = (train_x[..., 0] + train_x[..., 1] * train_x[..., 2] > 0).long()
batches = list(zip(train_x, train_y))

model = nn.Sequential(nn.Linear(24, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 2)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
trainer = Trainer(model, optimizer)
last = trainer.fit(batches, epochs=5)

print("steps", trainer.global_step)
print(f"final loss {last['loss'].item():.4f} acc {last['acc'].item():.4f}")
print("history", [round(h[0], 4) for h in trainer.history])
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
