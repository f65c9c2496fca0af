"""The PyTorch regression example: fit a polynomial with one Linear layer, batches drawn on the
host by get_batch(), a hand-written update, `while True` until the loss is small (or a step cap)."""
import itertools
import os

import torch
import torch.nn.functional as F

POLY_DEGREE = 4
torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    return x.to(device), f(x).to(device)


fc = torch.nn.Linear(W_target.size(0), 1).to(device)
max_steps = int(os.environ.get("CG_STEPS", "200"))
_cg_compiled_fc = torch.compile(fc, mode="reduce-overhead")  # cg-advise: scope compile

for batch_idx in itertools.count(1):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    batch_x, batch_y = get_batch()
    fc.zero_grad()
    output = F.smooth_l1_loss(_cg_compiled_fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.01 * param.grad)
    if loss < 1e-3 or batch_idx >= max_steps:
        break

print(f"Loss: {loss:.6f} after {batch_idx} batches")
