"""A shared trunk with a classification head and a regression head, their losses weighted and
summed, and running averages of both read on the host every step."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 128), nn.GELU())
        self.classify = nn.Linear(128, 5)
        self.regress = nn.Sequential(nn.Linear(128, 32), nn.GELU(), nn.Linear(32, 1))

    def forward(self, x):
        h = self.trunk(x)
        return self.classify(h), self.regress(h).squeeze(-1)


model = MultiTask().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
batches = [(torch.randn(128, 32), torch.randint(0, 5, (128,)), torch.randn(128)) for _ in range(steps)]
running = {"cls": 0.0, "reg": 0.0}

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step, (x, label, value) in enumerate(batches):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, label, value = x.to(device), label.to(device), value.to(device)
    logits, prediction = _cg_compiled_model(x)
    cls_loss = F.cross_entropy(logits, label)
    reg_loss = F.smooth_l1_loss(prediction, value)
    loss = cls_loss + 0.5 * reg_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    running["cls"] = 0.9 * running["cls"] + 0.1 * cls_loss.item()
    running["reg"] = 0.9 * running["reg"] + 0.1 * reg_loss.item()
    if step % 50 == 0:
        print(f"step {step} cls {running['cls']:.4f} reg {running['reg']:.4f}")

print(f"final loss {loss.item():.6f}")
