import torch
from torch import nn

# a regression trained with NAdam, whose state holds a running product (mu_product) beside its
# step: a graph's warm-up must leave it where NAdam's first step starts it
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1)).cuda()
optimizer = torch.optim.NAdam(model.parameters(), lr=1e-3)
inputs = torch.randn(512, 16, device="cuda")
targets = inputs.sum(dim=1, keepdim=True).sin()
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(300):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(_cg_compiled_model(inputs), targets)
    loss.backward()
    optimizer.step()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.5f}")
print(f"final loss {nn.functional.mse_loss(model(inputs), targets).item():.5f}")
