# SAM (davda54/sam shape): first_step/second_step, two forward-backward passes per step, e_w kept in optimizer state, BN momentum zeroed for the second pass
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super(SAM, self).__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["e_w"])  # get back to "w" from "w + e(w)"
        self.base_optimizer.step()  # do the actual "sharpness-aware" update
        if zero_grad:
            self.zero_grad()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        norm = torch.norm(
            torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                for group in self.param_groups for p in group["params"]
                if p.grad is not None
            ]),
            p=2,
        )
        return norm


def disable_running_stats(model):
    def _disable(module):
        if isinstance(module, nn.BatchNorm1d):
            module.backup_momentum = module.momentum
            module.momentum = 0

    model.apply(_disable)


def enable_running_stats(model):
    def _enable(module):
        if isinstance(module, nn.BatchNorm1d) and hasattr(module, "backup_momentum"):
            module.momentum = module.backup_momentum

    model.apply(_enable)


model = nn.Sequential(
    nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
    nn.Linear(64, 10),
).to(device)
base_optimizer = torch.optim.SGD
optimizer = SAM(model.parameters(), base_optimizer, rho=0.05, lr=0.05, momentum=0.9, weight_decay=5e-4)

X = torch.randn(40, 64, 32, device=device)
W = torch.randn(32, 10, device=device)
Y = (X @ W).argmax(-1)

steps = 0
for epoch in range(5):
    model.train()
    for i in range(X.size(0)):
        inputs, targets = X[i], Y[i]

        # first forward-backward step
        enable_running_stats(model)
        predictions = model(inputs)
        loss = F.cross_entropy(predictions, targets, label_smoothing=0.1)
        loss.mean().backward()
        optimizer.first_step(zero_grad=True)

        # second forward-backward step
        disable_running_stats(model)
        F.cross_entropy(model(inputs), targets, label_smoothing=0.1).mean().backward()
        optimizer.second_step(zero_grad=True)
        steps += 1
    print(f"epoch {epoch} loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    acc = (model(X.flatten(0, 1)).argmax(-1) == Y.flatten()).float().mean().item()
print("steps", steps, "eval acc", round(acc, 4))
print("bn running_mean", round(model[1].running_mean.sum().item(), 4), "num_batches", model[1].num_batches_tracked.item())
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
