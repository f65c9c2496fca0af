import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
inputs = iter([(torch.randn(8, 16), torch.randn(8, 1)) for _ in range(steps)])
total = 0.0

step = 0
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile
for _cg_p in (model.parameters() if isinstance(model, torch.nn.Module) else ()):  # cg-advise: gradients add up over backward calls: each is copied out of compile's CUDA graph memory
    if _cg_p.requires_grad:
        _cg_p.register_hook(torch.clone)

while step < steps:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, y = next(inputs)
    x, y = x.to(device), y.to(device)
    loss = (_cg_compiled_model(x) - y).pow(2).mean()
    loss.backward()
    optimizer.step()
    model.zero_grad(set_to_none=False)
    total += loss.item()
    step += 1

print(f"mean loss {total / steps:.6f} last {loss.item():.6f}")
