import torch
from torch import nn

model = nn.Linear(32, 32).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
accumulate = 4
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile
for _cg_p in (model.parameters() if isinstance(model, torch.nn.Module) else ()):  # cg-advise: gradients add up over backward calls: each is copied out of compile's CUDA graph memory
    if _cg_p.requires_grad:
        _cg_p.register_hook(torch.clone)

for i, batch in enumerate([torch.randn(8, 32, device="cuda") for _ in range(800)]):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    loss = _cg_compiled_model(batch).square().mean() / accumulate
    loss.backward()
    if (i + 1) % accumulate == 0:
        opt.step()
        opt.zero_grad()
