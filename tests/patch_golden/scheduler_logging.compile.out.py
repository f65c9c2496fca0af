import logging

import torch
from torch import nn
from torch.optim.lr_scheduler import CosineAnnealingLR

log = logging.getLogger(__name__)
model = nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = CosineAnnealingLR(optimizer, T_max=100)
x, y = torch.randn(32, 16, device="cuda"), torch.randn(32, 4, device="cuda")

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for it in range(200):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(_cg_compiled_model(x), y)
    loss.backward()
    optimizer.step()
    scheduler.step()
    if it % 20 == 0:
        logging.info("iteration %d loss %.4f", it, loss.item())
