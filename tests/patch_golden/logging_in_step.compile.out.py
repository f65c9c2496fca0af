import torch
from torch import nn

model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 10)).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = nn.CrossEntropyLoss()
batches = [(torch.randn(32, 64, device="cuda"), torch.randint(0, 10, (32,), device="cuda")) for _ in range(200)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step, (x, y) in enumerate(batches):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    out = _cg_compiled_model(x)
    loss = crit(out, y)
    if step % 10 == 0:  # periodic logging, inside the step
        print("step", step, "loss", loss.item())
    loss.backward()
    optimizer.step()
