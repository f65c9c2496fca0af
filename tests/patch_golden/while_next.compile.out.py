import torch
from torch import nn

net = nn.Linear(10, 2).cuda()
opt = torch.optim.Adam(net.parameters(), lr=1e-3, capturable=True)
loader = iter([(torch.randn(4, 10, device="cuda"), torch.randint(0, 2, (4,), device="cuda")) for _ in range(200)])
step = 0
_cg_compiled_net = torch.compile(net, mode="reduce-overhead")  # cg-advise: scope compile

while step < 200:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    inputs, labels = next(loader)
    opt.zero_grad(set_to_none=True)
    out = _cg_compiled_net(inputs)
    l = nn.functional.cross_entropy(out, labels)
    l.backward()
    opt.step()
    step += 1
