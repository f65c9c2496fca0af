import torch
from torch import nn

model = nn.Linear(64, 64).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
scaler = torch.cuda.amp.GradScaler()
batches = [torch.randn(8, 64, device="cuda") for _ in range(4)] * 50

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for batch in batches:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    optimizer.zero_grad()
    with torch.autocast("cuda", dtype=torch.float16):
        loss = _cg_compiled_model(batch).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
