"""timm's train.py train_one_epoch(): the loss scaler is a NativeScaler object whose
__call__ does scale(loss).backward(), unscale_ + clip_grad_norm_ when clip_grad is set,
then step and update; autocast(float16) enabled only on cuda; a ModelEma copy updated
under no_grad after every step; the scheduler stepped per update with
step_update(num_updates=...); torch.cuda.synchronize() after each step, as timm does for
its timing meters."""
import copy
import math
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class NativeScaler:
    def __init__(self):
        self._scaler = torch.amp.GradScaler(device, enabled=device == "cuda")

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None):
        self._scaler.scale(loss).backward()
        if clip_grad is not None:
            self._scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
        self._scaler.step(optimizer)
        self._scaler.update()


class ModelEma:
    def __init__(self, model, decay=0.998):
        self.module = copy.deepcopy(model).eval()
        self.decay = decay
        for p in self.module.parameters():
            p.requires_grad_(False)

    def update(self, model):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                ema_v.copy_(ema_v * self.decay + (1.0 - self.decay) * model_v)


class CosineLRScheduler:
    def __init__(self, optimizer, t_initial, lr_min=1e-5, warmup_t=10):
        self.optimizer, self.t_initial, self.lr_min, self.warmup_t = optimizer, t_initial, lr_min, warmup_t
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]

    def step_update(self, num_updates):
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            if num_updates < self.warmup_t:
                lr = base * (num_updates + 1) / self.warmup_t
            else:
                t = (num_updates - self.warmup_t) / max(1, self.t_initial - self.warmup_t)
                lr = self.lr_min + 0.5 * (base - self.lr_min) * (1 + math.cos(math.pi * min(t, 1.0)))
            group["lr"] = lr


def train_one_epoch(epoch, model, loader, optimizer, loss_fn, loss_scaler, model_ema, lr_scheduler):
    num_updates = epoch * len(loader)
    model.train()
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for input, target in loader:
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        with torch.autocast(device, dtype=torch.float16, enabled=device == "cuda"):
            output = _cg_compiled_model(input)
            loss = loss_fn(output, target)
        optimizer.zero_grad()
        loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())
        model_ema.update(model)
        if device == "cuda":
            torch.cuda.synchronize()
        num_updates += 1
        lr_scheduler.step_update(num_updates=num_updates)
    return loss


model = nn.Sequential(nn.Linear(48, 128), nn.BatchNorm1d(128), nn.GELU(), nn.Linear(128, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
loader = [(torch.randn(32, 48, device=device), torch.randint(0, 10, (32,), device=device)) for _ in range(20)]
lr_scheduler = CosineLRScheduler(optimizer, t_initial=steps)
model_ema = ModelEma(model)
loss_scaler = NativeScaler()
loss_fn = nn.CrossEntropyLoss()
for epoch in range(steps // len(loader)):
    loss = train_one_epoch(epoch, model, loader, optimizer, loss_fn, loss_scaler, model_ema, lr_scheduler)
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
