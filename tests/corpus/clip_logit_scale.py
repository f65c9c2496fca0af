"""OpenCLIP's train_one_epoch(): an image tower and a text tower whose normalized features
meet in a logit matrix scaled by a learnable logit_scale (initialised to log(1/0.07)),
the symmetric contrastive cross-entropy, the cosine learning rate set each step through
assign_learning_rate(), and after optimizer.step() the in-place clamp of logit_scale to
[0, log(100)] under no_grad on unwrap_model(model)."""
import math
import os

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class CLIP(nn.Module):
    def __init__(self, embed_dim=64):
        super().__init__()
        self.visual = nn.Sequential(nn.Linear(192, 256), nn.GELU(), nn.Linear(256, embed_dim))
        self.text = nn.Sequential(nn.Linear(96, 256), nn.GELU(), nn.Linear(256, embed_dim))
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

    def forward(self, image, text):
        image_features = F.normalize(self.visual(image), dim=-1)
        text_features = F.normalize(self.text(text), dim=-1)
        return image_features, text_features, self.logit_scale.exp()


def unwrap_model(model):
    return model.module if hasattr(model, "module") else model


def assign_learning_rate(optimizer, new_lr):
    for param_group in optimizer.param_groups:
        param_group["lr"] = new_lr


def cosine_lr(optimizer, base_lr, warmup_length, total_steps):
    def _lr_adjuster(step):
        if step < warmup_length:
            lr = base_lr * (step + 1) / warmup_length
        else:
            e = step - warmup_length
            lr = 0.5 * (1 + np.cos(np.pi * e / (total_steps - warmup_length))) * base_lr
        assign_learning_rate(optimizer, lr)
        return lr
    return _lr_adjuster


def clip_loss(image_features, text_features, logit_scale):
    logits_per_image = logit_scale * image_features @ text_features.T
    logits_per_text = logit_scale * text_features @ image_features.T
    labels = torch.arange(logits_per_image.shape[0], device=image_features.device, dtype=torch.long)
    return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


model = CLIP().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.2)
latent = torch.randn(640, 32)
images = torch.cat([latent, torch.randn(640, 160)], dim=1) @ torch.randn(192, 192) / 8
texts = torch.cat([latent, torch.randn(640, 64)], dim=1) @ torch.randn(96, 96) / 8
loader = [(images[i:i + 64].to(device), texts[i:i + 64].to(device)) for i in range(0, 640, 64)]
num_batches_per_epoch = len(loader)
scheduler = cosine_lr(optimizer, 5e-4, 10, steps)

for epoch in range(steps // num_batches_per_epoch):
    model.train()
    for i, (image, text) in enumerate(loader):
        step = num_batches_per_epoch * epoch + i
        scheduler(step)
        optimizer.zero_grad()
        image_features, text_features, logit_scale = model(image, text)
        total_loss = clip_loss(image_features, text_features, logit_scale)
        total_loss.backward()
        optimizer.step()
        with torch.no_grad():
            unwrap_model(model).logit_scale.clamp_(0, math.log(100))
loss = total_loss
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
