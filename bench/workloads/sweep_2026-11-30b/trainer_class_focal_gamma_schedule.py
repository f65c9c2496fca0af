# Trainer class (self.model / self.optimizer / self.criterion) whose fit() ramps the focal loss's gamma attribute per epoch
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class FocalLoss(nn.Module):
    def __init__(self, gamma=0.0):
        super().__init__()
        self.gamma = gamma

    def forward(self, logits, target):
        logp = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
        return (-(1 - logp.exp()) ** self.gamma * logp).mean()


class Trainer:
    def __init__(self, model, train_batches, epochs=4):
        self.model = model.to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.criterion = FocalLoss()
        self.train_batches = train_batches
        self.epochs = epochs
        self.history = []

    def fit(self):
        for epoch in range(self.epochs):
            # curriculum: plain cross entropy first, focusing on hard examples later
            self.criterion.gamma = 2.0 * epoch / (self.epochs - 1)
            self.model.train()
            total = torch.zeros((), device=device)
            for features, target in self.train_batches:
                self.optimizer.zero_grad()
                logits = self.model(features)
                loss = self.criterion(logits, target)
                loss.backward()
                self.optimizer.step()
                total += loss.detach()
            epoch_loss = total.item() / len(self.train_batches)
            self.history.append(epoch_loss)
            print(f"epoch {epoch} gamma {self.criterion.gamma:.2f} loss {epoch_loss:.5f}")


net = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 6))
batches = [(torch.randn(48, 24, device=device), torch.randint(0, 6, (48,), device=device)) for _ in range(15)]
trainer = Trainer(net, batches)
trainer.fit()
print("history", [round(h, 5) for h in trainer.history])
print("param sum", round(sum(p.sum().item() for p in net.parameters()), 4))
