# optimizer.zero_grad(set_to_none=False) at the END of the loop body (gradients zeroed in place); grad norm read before it
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

train_x = torch.randn(50, 48, 24, device=device)
train_y = torch.sin(train_x[..., :3].sum(-1, keepdim=True)) + 0.1 * torch.randn(50, 48, 1, device=device)

model = nn.Sequential(nn.Linear(24, 96), nn.Tanh(), nn.Linear(96, 96), nn.Tanh(), nn.Linear(96, 1)).to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

step = 0
for epoch in range(4):
    total = 0.0
    for x, y in zip(train_x, train_y):
        pred = model(x)
        loss = criterion(pred, y)
        loss.backward()
        optimizer.step()
        total += loss.item()
        step += 1
        if step % 40 == 0:
            grad_norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters()]))
            print(f"step {step} loss {loss.item():.4f} grad_norm {grad_norm.item():.4f}")
        optimizer.zero_grad(set_to_none=False)
    print(f"epoch {epoch} mean loss {total / len(train_x):.4f}")

print("steps", step)
print(f"final loss {loss.item():.4f}")
print("grad sum after loop", round(sum(p.grad.double().abs().sum() for p in model.parameters()).item(), 4))
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
