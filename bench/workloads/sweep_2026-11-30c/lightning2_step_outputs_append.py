# Lightning 2.x migration shape without Lightning: training_step appends to self.training_step_outputs, epoch end stacks and clears
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class LitRegressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 48), nn.SiLU(), nn.Linear(48, 1))
        self.training_step_outputs = []
        self.epoch_means = []

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch):
        x, y = batch
        loss = F.smooth_l1_loss(self(x), y)
        self.training_step_outputs.append(loss.detach())
        return loss

    def on_train_epoch_end(self):
        epoch_mean = torch.stack(self.training_step_outputs).mean()
        self.epoch_means.append(round(epoch_mean.item(), 5))
        self.training_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3, weight_decay=0.01)


module = LitRegressor().to(device)
optimizer = module.configure_optimizers()
xs = torch.randn(25, 32, 12, device=device)
ys = torch.sin(xs[..., :1]) + 0.5 * xs[..., 1:2]
batches = list(zip(xs, ys))
for epoch in range(3):
    module.train()
    for batch in batches:
        optimizer.zero_grad()
        loss = module.training_step(batch)
        loss.backward()
        optimizer.step()
    module.on_train_epoch_end()
    print("epoch", epoch, "mean loss", module.epoch_means[-1])
print("param sum", round(sum(p.sum().item() for p in module.parameters()), 5))
