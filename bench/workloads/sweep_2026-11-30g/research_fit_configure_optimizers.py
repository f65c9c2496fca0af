# research-repo Trainer: fit() builds the optimizer via self.configure_optimizers(), train_epoch() loops calling self.training_step(batch)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class Classifier(nn.Module):
    def __init__(self, d_in=32, hidden=128, n_classes=5, p=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Dropout(p),
                                 nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, model, train_batches, lr=1e-3, weight_decay=1e-4):
        self.model = model
        self.train_batches = train_batches
        self.lr = lr
        self.weight_decay = weight_decay
        self.optimizer = None
        self.history = []

    def configure_optimizers(self):
        return torch.optim.AdamW(self.model.parameters(), lr=self.lr, weight_decay=self.weight_decay)

    def training_step(self, batch):
        x, y = batch
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def train_epoch(self, epoch):
        self.model.train()
        total = 0.0
        for batch in self.train_batches:
            loss = self.training_step(batch)
            total += loss.item()
        mean = total / len(self.train_batches)
        self.history.append(mean)
        print(f"epoch {epoch} train_loss {mean:.4f}")

    def fit(self, epochs):
        self.optimizer = self.configure_optimizers()
        for epoch in range(epochs):
            self.train_epoch(epoch)


xs = torch.randn(30, 64, 32, device=device)
ys = (xs[..., :5] * torch.linspace(-1, 1, 5, device=device)).argmax(-1)
trainer = Trainer(Classifier().to(device), list(zip(xs, ys)))
trainer.fit(epochs=4)

print("history", [round(h, 4) for h in trainer.history])
print("checksum", round(sum(p.double().sum() for p in trainer.model.parameters()).item(), 4))
