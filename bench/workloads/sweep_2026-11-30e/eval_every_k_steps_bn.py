# validation inside the epoch every K steps: model.eval() + no_grad forward, then model.train() back (BatchNorm and dropout change with the mode)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(
    nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.3),
    nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Linear(64, 2),
).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)

train_x = torch.randn(75, 32, 20, device=device) * 2 + 1
train_y = (train_x[..., :4].sum(-1) > 4).long()
val_x = torch.randn(256, 20, device=device) * 2 + 1
val_y = (val_x[:, :4].sum(-1) > 4).long()
eval_every = 25

global_step = 0
val_history = []
for epoch in range(3):
    model.train()
    for i in range(train_x.size(0)):
        out = model(train_x[i])
        loss = F.cross_entropy(out, train_y[i])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        global_step += 1
        if global_step % eval_every == 0:
            model.eval()
            with torch.no_grad():
                val_logits = model(val_x)
                val_loss = F.cross_entropy(val_logits, val_y).item()
                val_acc = (val_logits.argmax(1) == val_y).float().mean().item()
            val_history.append((global_step, round(val_loss, 4), round(val_acc, 4)))
            model.train()
    print(f"epoch {epoch} train loss {loss.item():.4f} last val {val_history[-1]}")

print("evals", len(val_history), "final val", val_history[-1])
print("bn1 running_mean", round(model[1].running_mean.sum().item(), 4), "tracked", model[1].num_batches_tracked.item())
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
