import torch
from torch import nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).cuda()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = [(torch.randn(16, 32, device="cuda"), torch.randn(16, 1, device="cuda")) for _ in range(200)]

losses = []  # the loss of every step, read once at the end
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for x, y in data:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(_cg_compiled_model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss.detach())

print(f"first {losses[0].item():.4f} last {losses[-1].item():.4f}")
