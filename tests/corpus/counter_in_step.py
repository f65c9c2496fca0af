import torch
from torch import nn

model = nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
seen = 0
for x in [torch.randn(2, 4, device="cuda") for _ in range(200)]:
    opt.zero_grad()
    seen += x.shape[0]
    loss = model(x).pow(2).mean()
    scaled = loss * 2
    scaled.backward()
    opt.step()
print("samples seen", seen)
