# NaN guard: `if not torch.isfinite(loss): optimizer.zero_grad(); continue` skips a corrupted batch before backward
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(24, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 1)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
criterion = nn.MSELoss()

inputs = torch.randn(60, 32, 24, device=device)
targets = inputs.pow(2).sum(-1, keepdim=True).sqrt()
# a few corrupted samples, as a real dataset has (a division by zero upstream)
inputs[7, 3, 5] = float("nan")
inputs[23, 0, 0] = float("nan")
inputs[41, 10, 2] = float("nan")

step = 0
skipped = 0
for epoch in range(4):
    model.train()
    epoch_loss = 0.0
    for batch_idx in range(inputs.size(0)):
        x, y = inputs[batch_idx], targets[batch_idx]
        output = model(x)
        loss = criterion(output, y)
        if not torch.isfinite(loss):
            print(f"non-finite loss at epoch {epoch} batch {batch_idx}, skipping")
            optimizer.zero_grad()
            skipped += 1
            continue
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()
        step += 1
    print(f"epoch {epoch} mean loss {epoch_loss / (inputs.size(0) - 3):.4f}")

print("steps", step, "skipped", skipped, "final loss", round(loss.item(), 4) if torch.isfinite(loss) else "nan")
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
