# "PyTorch Step by Step" (dvgodoy) shape: make_train_step() returns a closure; here it returns a dict of detached metrics
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


def make_train_step(model, loss_fn, optimizer):
    def perform_train_step(x, y):
        model.train()
        logits = model(x)
        loss = loss_fn(logits, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        correct = (logits.argmax(dim=1) == y).sum()
        return {"loss": loss.detach(), "correct": correct}
    return perform_train_step


def make_val_step(model, loss_fn):
    def perform_val_step(x, y):
        model.eval()
        logits = model(x)
        return loss_fn(logits, y)
    return perform_val_step


model = nn.Sequential(nn.Linear(16, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 3)).to(device)
loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
train_step = make_train_step(model, loss_fn, optimizer)
val_step = make_val_step(model, loss_fn)

x_train = torch.randn(20, 32, 16, device=device)
y_train = (x_train[..., 0] > 0).long() + (x_train[..., 1] > 1).long()
x_val, y_val = torch.randn(128, 16, device=device), torch.randint(0, 3, (128,), device=device)
losses, val_losses = [], []
for epoch in range(3):
    totals = {"loss": torch.zeros((), device=device), "correct": torch.zeros((), device=device, dtype=torch.long)}
    for x_batch, y_batch in zip(x_train, y_train):
        metrics = train_step(x_batch, y_batch)
        for key, value in metrics.items():
            totals[key] += value
    losses.append(round(totals["loss"].item() / len(x_train), 5))
    with torch.no_grad():
        val_losses.append(round(val_step(x_val, y_val).item(), 5))
    print("epoch", epoch, "loss", losses[-1], "acc", round(totals["correct"].item() / y_train.numel(), 4),
          "val", val_losses[-1])
print("bn mean", round(model[1].running_mean.sum().item(), 5), "param sum",
      round(sum(p.sum().item() for p in model.parameters()), 5))
