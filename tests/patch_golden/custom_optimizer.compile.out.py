import os

import torch
from torch import nn


class SignSGD(torch.optim.Optimizer):
    """A hand-written optimizer: no `capturable` option, so its step stays out of the graph."""

    def __init__(self, params, lr=1e-3):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad.sign(), alpha=-group["lr"])


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = SignSGD(model.parameters(), lr=1e-3)
data = [(torch.randn(16, 32, device=device), torch.randn(16, 1, device=device)) for _ in range(steps)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for x, y in data:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(_cg_compiled_model(x), y)
    loss.backward()
    optimizer.step()

print(f"final loss {loss.item():.6f}")
