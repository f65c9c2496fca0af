# Trainer whose step takes (self, x, y) and calls a helper self.compute_loss(outputs, y); deep-supervision aux weight decayed per epoch by the loop
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class DeepSupNet(nn.Module):
    def __init__(self, d=40, h=96, c=6):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(d, h), nn.GELU(), nn.Linear(h, h), nn.GELU())
        self.aux_head = nn.Linear(h, c)
        self.head = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.Linear(h, c))

    def forward(self, x):
        f = self.body(x)
        return self.head(f), self.aux_head(f)


class Trainer:
    def __init__(self, model, optimizer, epochs, aux_weight=0.4):
        self.model = model
        self.optimizer = optimizer
        self.epochs = epochs
        self.aux_weight = aux_weight

    def compute_loss(self, outputs, y):
        main, aux = outputs
        return F.cross_entropy(main, y) + self.aux_weight * F.cross_entropy(aux, y)

    def train_step(self, x, y):
        self.model.train()
        outputs = self.model(x)
        loss = self.compute_loss(outputs, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def train(self, xs, ys):
        for epoch in range(self.epochs):
            self.aux_weight = 0.4 * (1.0 - epoch / self.epochs)
            running = 0.0
            for x, y in zip(xs, ys):
                loss = self.train_step(x, y)
                running += loss.item()
            print(f"epoch {epoch} aux_w {self.aux_weight:.2f} loss {running / len(xs):.4f}")


xs = torch.randn(32, 48, 40, device=device)
ys = (xs[..., :6].cumsum(-1)).argmax(-1)
model = DeepSupNet().to(device)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), epochs=4)
trainer.train(xs, ys)

print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
