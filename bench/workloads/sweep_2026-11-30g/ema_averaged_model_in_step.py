# Trainer holding an EMA of weights in self.ema (torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn), updated inside train_step after optimizer.step(); EMA evaluated each epoch
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

torch.manual_seed(0)
device = "cuda"


class Trainer:
    def __init__(self, model, lr=1e-3, ema_decay=0.95):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(ema_decay))

    def train_step(self, x, y):
        out = self.model(x)
        loss = F.smooth_l1_loss(out, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.ema.update_parameters(self.model)
        return loss

    @torch.no_grad()
    def evaluate(self, x, y):
        self.ema.eval()
        return F.smooth_l1_loss(self.ema(x), y).item()

    def fit(self, xs, ys, val, epochs):
        for epoch in range(epochs):
            self.model.train()
            total = 0.0
            for x, y in zip(xs, ys):
                total += self.train_step(x, y).item()
            print(f"epoch {epoch} train {total / len(xs):.4f} ema_val {self.evaluate(*val):.4f}")


w = torch.randn(12, 3, device=device)
xs = torch.randn(30, 32, 12, device=device)
ys = torch.sin(xs @ w)
val = (torch.randn(256, 12, device=device),)
val = (val[0], torch.sin(val[0] @ w))
model = nn.Sequential(nn.Linear(12, 64), nn.SiLU(), nn.Linear(64, 3)).to(device)
trainer = Trainer(model)
trainer.fit(xs, ys, val, epochs=4)

print("n_averaged", int(trainer.ema.n_averaged))
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
print("ema checksum", round(sum(p.double().sum() for p in trainer.ema.module.parameters()).item(), 4))
