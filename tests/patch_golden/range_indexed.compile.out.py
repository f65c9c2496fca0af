import torch
from torch import nn

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
criterion = nn.CrossEntropyLoss()
inputs = [torch.randn(8, 16, device="cuda") for _ in range(4)]
targets = [torch.randint(0, 4, (8,), device="cuda") for _ in range(4)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(200):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, y = inputs[step % 4], targets[step % 4]
    optimizer.zero_grad()
    loss = criterion(_cg_compiled_model(x), y)
    loss.backward()
    optimizer.step()
