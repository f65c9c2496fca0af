import os
import tempfile

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(32, 8, device=device), torch.randn(32, 1, device=device)

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(_cg_compiled_model(x), y)
    loss.backward()
    optimizer.step()

with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "checkpoint.pt")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "loss": loss, "step": step}, path)
    restored = torch.load(path)
print(f"saved step {restored['step']} loss {restored['loss'].item():.6f}")
print("weight sum", round(sum(v.sum().item() for v in restored["model"].values()), 5))
