# Trainer configured by a dataclass self.cfg (step reads self.cfg.grad_clip, self.cfg.label_smoothing); loop is `while step < max_steps` with next(it), re-iterating on StopIteration
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


@dataclass
class TrainConfig:
    lr: float = 2e-3
    grad_clip: float = 0.5
    label_smoothing: float = 0.1
    max_steps: int = 120
    log_every: int = 30


class Trainer:
    def __init__(self, cfg, model, batches):
        self.cfg = cfg
        self.model = model
        self.batches = batches
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95))

    def train_step(self, x, y):
        logits = self.model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=self.cfg.label_smoothing)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.optimizer.step()
        return loss.detach()

    def run(self):
        self.model.train()
        it = iter(self.batches)
        step = 0
        window = []
        while step < self.cfg.max_steps:
            try:
                x, y = next(it)
            except StopIteration:
                it = iter(self.batches)
                x, y = next(it)
            loss = self.train_step(x, y)
            window.append(loss)
            step += 1
            if step % self.cfg.log_every == 0:
                print(f"step {step} loss {torch.stack(window).mean().item():.4f}")
                window = []
        return step


xs = torch.randn(36, 32, 16, device=device)
ys = (xs @ torch.randn(16, 4, device=device)).argmax(-1)
model = nn.Sequential(nn.Linear(16, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 4)).to(device)
trainer = Trainer(TrainConfig(), model, list(zip(xs, ys)))
steps = trainer.run()

print("steps", steps)
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
