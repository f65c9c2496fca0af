# Regression with a step function: batch is a tuple unpacked inside, clamped in place
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda")


def train_step(model, optimizer, batch):
    inputs, targets = batch
    inputs.clamp_(-2.0, 2.0)
    targets.mul_(0.1)
    optimizer.zero_grad(set_to_none=True)
    preds = model(inputs)
    loss = nn.functional.mse_loss(preds, targets)
    loss.backward()
    optimizer.step()
    return loss


model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
X = torch.randn(640, 16, device=device) * 3
Y = torch.randn(640, 1, device=device) * 10

for epoch in range(3):
    for i in range(0, X.shape[0], 64):
        batch = (X[i:i + 64], Y[i:i + 64])
        loss = train_step(model, optimizer, batch)
    print(f"epoch {epoch} loss {loss.item():.4f}")
print("data max", X.abs().max().item(), "target std", Y.std().item())
