import torch
from torch import nn

model = nn.Linear(32, 32).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
accumulate = 4
for i, batch in enumerate([torch.randn(8, 32, device="cuda") for _ in range(800)]):
    loss = model(batch).square().mean() / accumulate
    loss.backward()
    if (i + 1) % accumulate == 0:
        opt.step()
        opt.zero_grad()
