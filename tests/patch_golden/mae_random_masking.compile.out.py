"""MAE's engine_pretrain.py: random masking each step (rand, argsort, gather; fixed ratio), loss on
masked patches vs. normalized targets made under no_grad, AdamW groups from param_groups_weight_decay(),
lr per iteration by adjust_learning_rate(optimizer, epoch_float), sys.exit(1) on a non-finite loss.item()."""
import math
import os
import sys

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
img, patch, dim, mask_ratio, epochs, warmup_epochs, blr, min_lr = 16, 4, 64, 0.75, 10, 1, 1.5e-3, 1e-5
L, patch_dim, len_keep = (img // patch) ** 2, patch * patch * 3, int((img // patch) ** 2 * (1 - mask_ratio))


class MAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch_embed = nn.Linear(patch_dim, dim)
        self.pos_embed = nn.Parameter(torch.randn(1, L, dim) * 0.02)
        self.encoder = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 128), nn.GELU(), nn.Linear(128, dim))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.decoder = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 128), nn.GELU(), nn.Linear(128, patch_dim))

    def patchify(self, imgs):
        h = img // patch
        return imgs.reshape(-1, 3, h, patch, h, patch).permute(0, 2, 4, 3, 5, 1).reshape(-1, L, patch_dim)

    def forward(self, imgs):
        x = self.patch_embed(self.patchify(imgs)) + self.pos_embed
        N, _, D = x.shape  # batch, length, dim
        noise = torch.rand(N, L, device=imgs.device)  # noise in [0, 1]
        ids_shuffle = torch.argsort(noise, dim=1)  # ascend: small is keep, large is remove
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        x = torch.gather(x, 1, ids_shuffle[:, :len_keep].unsqueeze(-1).repeat(1, 1, D))
        mask = torch.ones(N, L, device=imgs.device)
        mask[:, :len_keep] = 0
        mask = torch.gather(mask, 1, ids_restore)  # 0 is keep, 1 is remove
        latent = x + self.encoder(x)
        tokens = torch.cat([latent, self.mask_token.repeat(N, L - len_keep, 1)], dim=1)
        tokens = torch.gather(tokens, 1, ids_restore.unsqueeze(-1).repeat(1, 1, D)) + self.pos_embed
        pred = self.decoder(tokens)
        with torch.no_grad():  # norm_pix_loss
            target = self.patchify(imgs)
            mean, var = target.mean(dim=-1, keepdim=True), target.var(dim=-1, keepdim=True)
            target = (target - mean) / (var + 1.e-6) ** .5
        loss = ((pred - target) ** 2).mean(dim=-1)
        return (loss * mask).sum() / mask.sum()


def param_groups_weight_decay(model, wd):
    decay, no_decay = [], []
    for name, param in model.named_parameters():  # no decay for biases, norms, pos_embed, mask_token
        (no_decay if param.ndim <= 1 or name.endswith(".bias") else decay).append(param)
    return [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": wd}]


def adjust_learning_rate(optimizer, epoch):
    if epoch < warmup_epochs:
        lr = blr * epoch / warmup_epochs
    else:
        lr = min_lr + (blr - min_lr) * 0.5 * (1. + math.cos(math.pi * (epoch - warmup_epochs) / (epochs - warmup_epochs)))
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr


def train_one_epoch(model, data_loader, optimizer, epoch):
    model.train()
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for data_iter_step, samples in enumerate(data_loader):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        adjust_learning_rate(optimizer, data_iter_step / len(data_loader) + epoch)
        loss = _cg_compiled_model(samples)
        loss_value = loss.item()
        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            sys.exit(1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss


model = MAE().to(device)
optimizer = torch.optim.AdamW(param_groups_weight_decay(model, 0.05), lr=blr, betas=(0.9, 0.95))
data_loader = [torch.randn(32, 3, img, img, device=device) for _ in range(max(1, steps // epochs))]
for epoch in range(epochs):
    loss = train_one_epoch(model, data_loader, optimizer, epoch)
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
