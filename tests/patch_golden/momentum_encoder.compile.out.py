"""A BYOL-style self-supervised loop: an online encoder and predictor trained on one view, a
target encoder (an exponential moving average of the online one, never trained) run without
grad on the other view; the target's weights move after each optimizer step."""
import copy
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
online = nn.Sequential(nn.Linear(64, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 32)).to(device)
predictor = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32)).to(device)
target = copy.deepcopy(online)
for p in target.parameters():
    p.requires_grad_(False)
optimizer = torch.optim.SGD([*online.parameters(), *predictor.parameters()], lr=0.05, momentum=0.9)
tau = 0.99
views = [(torch.randn(128, 64), torch.randn(128, 64)) for _ in range(8)]


def regression_loss(x, y):
    return 2 - 2 * F.cosine_similarity(x, y, dim=-1).mean()


_cg_compiled_online = torch.compile(online, mode="reduce-overhead")  # cg-advise: scope compile
_cg_compiled_predictor = torch.compile(predictor, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    view_1, view_2 = views[step % len(views)]
    view_1, view_2 = view_1.to(device), view_2.to(device)
    prediction = _cg_compiled_predictor(_cg_compiled_online(view_1))
    with torch.no_grad():
        projection = target(view_2)
    loss = regression_loss(prediction, projection)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        for p_target, p_online in zip(target.parameters(), online.parameters()):
            p_target.mul_(tau).add_(p_online, alpha=1 - tau)
    if step % 50 == 49:
        print(f"step {step + 1} loss {loss.item():.5f}")
print(f"final {loss.item():.6f}")
