import torch
from torch import nn

model = nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
seen = 0
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for x in [torch.randn(2, 4, device="cuda") for _ in range(200)]:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    opt.zero_grad()
    seen += x.shape[0]
    loss = _cg_compiled_model(x).pow(2).mean()
    scaled = loss * 2
    scaled.backward()
    opt.step()
print("samples seen", seen)
