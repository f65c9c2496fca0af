# Trainer with mixed precision: autocast in train_step, a GradScaler held in self.scaler (scale/backward, unscale_, clip, step, update)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class Trainer:
    def __init__(self, model, optimizer, max_norm=1.0):
        self.model = model
        self.optimizer = optimizer
        self.scaler = torch.amp.GradScaler("cuda")
        self.max_norm = max_norm

    def train_step(self, x, y):
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.detach().float()

    def fit(self, xs, ys, epochs):
        for epoch in range(epochs):
            self.model.train()
            losses = []
            for x, y in zip(xs, ys):
                losses.append(self.train_step(x, y))
            print(f"epoch {epoch} loss {torch.stack(losses).mean().item():.4f} scale {self.scaler.get_scale():.0f}")


xs = torch.randn(28, 64, 64, device=device)
ys = (xs[..., :10] * xs[..., 10:20]).argmax(-1)
model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 10)).to(device)
trainer = Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-3))
trainer.fit(xs, ys, epochs=4)

print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
