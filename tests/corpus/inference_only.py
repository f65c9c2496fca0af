import torch
from torch import nn

model = nn.Linear(8, 8).cuda().eval()
with torch.no_grad():
    for _ in range(200):
        model(torch.randn(4, 8, device="cuda"))
