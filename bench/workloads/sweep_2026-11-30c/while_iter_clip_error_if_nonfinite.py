# step-budgeted while loop over a manual iterator restarted on StopIteration, clip_grad_norm_(error_if_nonfinite=True) as a NaN guard
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Embedding(50, 32), nn.Flatten(), nn.Linear(32 * 8, 64), nn.GELU(), nn.Linear(64, 2)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
tokens = torch.randint(0, 50, (12, 32, 8))
labels = (tokens[..., 0] > 25).long()
train_batches = list(zip(tokens, labels))
max_steps = 40
step = 0
data_iter = iter(train_batches)
running = None
while step < max_steps:
    try:
        input_ids, target = next(data_iter)
    except StopIteration:
        data_iter = iter(train_batches)
        input_ids, target = next(data_iter)
    input_ids, target = input_ids.to(device), target.to(device)
    loss = F.cross_entropy(model(input_ids), target)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
    optimizer.step()
    step += 1
    running = loss.detach() if running is None else running * 0.9 + loss.detach() * 0.1
    if step % 10 == 0:
        print(f"step {step} loss {running.item():.5f} grad norm {grad_norm.item():.4f}")
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
