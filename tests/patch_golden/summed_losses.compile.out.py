import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
encoder = nn.Sequential(nn.Linear(24, 48), nn.ReLU()).to(device)
classify = nn.Linear(48, 3).to(device)
regress = nn.Linear(48, 1).to(device)
params = list(encoder.parameters()) + list(classify.parameters()) + list(regress.parameters())
optimizer = torch.optim.Adam(params, lr=1e-3)
x = torch.randn(32, 24, device=device)
labels, targets = torch.randint(0, 3, (32,), device=device), torch.randn(32, 1, device=device)

_cg_compiled_encoder = torch.compile(encoder, mode="reduce-overhead")  # cg-advise: scope compile
_cg_compiled_classify = torch.compile(classify, mode="reduce-overhead")  # cg-advise: scope compile
_cg_compiled_regress = torch.compile(regress, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    features = _cg_compiled_encoder(x)
    class_loss = nn.functional.cross_entropy(_cg_compiled_classify(features), labels)
    regression_loss = nn.functional.mse_loss(_cg_compiled_regress(features), targets)
    loss = class_loss + 0.5 * regression_loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

print(f"class {class_loss.item():.6f} regression {regression_loss.item():.6f} total {loss.item():.6f}")
