import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
data = [(torch.randn(16, 32, device=device), torch.randn(16, 1, device=device)) for _ in range(steps)]

train_loss = 0.0
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for x, y in data:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    output = _cg_compiled_model(x)
    loss = nn.functional.mse_loss(output, y)
    loss.backward()
    train_loss += loss.item()  # a host read between backward and step: it feeds nothing in the step
    mean_out = output.mean().item()
    optimizer.step()

print(f"train loss {train_loss / steps:.6f} last mean output {mean_out:.6f}")
