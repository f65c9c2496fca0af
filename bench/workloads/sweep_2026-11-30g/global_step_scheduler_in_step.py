# Trainer that counts self.global_step in its loop and steps a warmup LambdaLR scheduler inside train_step right after optimizer.step()
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


class Trainer:
    def __init__(self, model, lr=1e-3, warmup=20, total=120):
        self.model = model
        self.criterion = nn.MSELoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer,
                                                           lambda s: min((s + 1) / warmup, (total - s) / (total - warmup)))
        self.global_step = 0

    def train_step(self, batch):
        x, target = batch
        pred = self.model(x)
        loss = self.criterion(pred, target)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.scheduler.step()
        return loss

    def train(self, batches, epochs):
        for epoch in range(epochs):
            self.model.train()
            epoch_loss = 0.0
            for batch in batches:
                loss = self.train_step(batch)
                epoch_loss += loss.item()
                self.global_step += 1
            print(f"epoch {epoch} step {self.global_step} loss {epoch_loss / len(batches):.5f} "
                  f"lr {self.scheduler.get_last_lr()[0]:.2e}")


xs = torch.randn(30, 32, 24, device=device)
w = torch.randn(24, 8, device=device)
batches = [(x, torch.tanh(x @ w)) for x in xs]
model = nn.Sequential(nn.Linear(24, 80), nn.ReLU(), nn.Linear(80, 8)).to(device)
trainer = Trainer(model)
trainer.train(batches, epochs=4)

print("last_epoch", trainer.scheduler.last_epoch)
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
