# Kendall et al. uncertainty weighting: two task losses weighted by learnable log-variances that the optimizer trains
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class SharedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.seg_head = nn.Linear(64, 3)
        self.depth_head = nn.Linear(64, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.seg_head(h), self.depth_head(h).squeeze(1)


model = SharedNet().to(device)
log_vars = nn.Parameter(torch.zeros(2, device=device))
optimizer = torch.optim.Adam([{"params": model.parameters()}, {"params": [log_vars], "lr": 1e-2}], lr=1e-3)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
xs = torch.randn(4 * 12, 32, 16).to(device)
seg = torch.randint(0, 3, (48, 32)).to(device)
depth = (torch.randn(48, 32) * 5).to(device)

step = 0
for _epoch in range(4):
    for x, s, d in zip(xs, seg, depth):
        seg_logits, depth_pred = model(x)
        losses = torch.stack([F.cross_entropy(seg_logits, s), F.l1_loss(depth_pred, d)])
        loss = (torch.exp(-log_vars) * losses + log_vars).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step % 10 == 0:
            print(step, [round(v, 4) for v in losses.tolist()], [round(v, 4) for v in log_vars.tolist()])
    scheduler.step()
print("final loss", round(loss.item(), 4), "weights", [round(w, 4) for w in torch.exp(-log_vars).tolist()])
