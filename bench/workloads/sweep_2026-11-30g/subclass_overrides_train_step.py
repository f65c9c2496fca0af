# BaseTrainer.fit() loops calling self.train_step(batch); MixupTrainer(BaseTrainer) overrides train_step with mixup that is switched off for the last epochs via self.epoch set in fit()
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class BaseTrainer:
    def __init__(self, model, optimizer, num_classes):
        self.model = model
        self.optimizer = optimizer
        self.num_classes = num_classes
        self.epoch = 0

    def train_step(self, batch):
        x, y = batch
        loss = F.cross_entropy(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def fit(self, batches, epochs):
        for epoch in range(epochs):
            self.epoch = epoch
            self.model.train()
            losses = []
            for batch in batches:
                losses.append(self.train_step(batch))
            print(f"epoch {epoch} loss {torch.stack(losses).mean().item():.4f}")


class MixupTrainer(BaseTrainer):
    def __init__(self, model, optimizer, num_classes, alpha=0.4, mixup_off_epoch=2):
        super().__init__(model, optimizer, num_classes)
        self.alpha = alpha
        self.mixup_off_epoch = mixup_off_epoch

    def train_step(self, batch):
        x, y = batch
        target = F.one_hot(y, self.num_classes).float()
        if self.epoch < self.mixup_off_epoch:
            lam = torch.distributions.Beta(self.alpha, self.alpha).sample((x.size(0), 1)).to(x.device)
            perm = torch.randperm(x.size(0), device=x.device)
            x = lam * x + (1 - lam) * x[perm]
            target = lam * target + (1 - lam) * target[perm]
        loss = torch.sum(-target * F.log_softmax(self.model(x), -1), -1).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


xs = torch.randn(30, 64, 24, device=device)
ys = (xs[..., :4] + 0.3 * xs[..., 4:8]).argmax(-1)
model = nn.Sequential(nn.Linear(24, 96), nn.ReLU(), nn.Linear(96, 96), nn.ReLU(), nn.Linear(96, 4)).to(device)
trainer = MixupTrainer(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True), 4)
trainer.fit(list(zip(xs, ys)), epochs=4)

print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
