import torch
from torch import nn

model = nn.Linear(8, 8).cuda().eval()
with torch.no_grad():
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for _ in range(200):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        _cg_compiled_model(torch.randn(4, 8, device="cuda"))
