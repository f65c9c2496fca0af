"""The model is a module-level global that a training function uses without receiving it:
rebinding it inside the function (model = torch.compile(model)) would make it a local that
the function reads before the assignment."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 5)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


def train(steps):
    model.train()
    x, y = torch.randn(128, 20, device=device), torch.randint(0, 5, (128,), device=device)
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for step in range(steps):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        logits = _cg_compiled_model(x)
        loss = nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return loss.item()


final = train(int(os.environ.get("CG_STEPS", "200")))
torch.save(model.state_dict(), os.devnull)
print(f"final loss {final:.6f} keys {sorted(model.state_dict())[:2]}")
