"""FixMatch's training loop (kekmodel/FixMatch-pytorch): a labeled and an unlabeled DataLoader
drawn by iterators restarted on StopIteration, weak and strong augmentation as tensor ops, one
forward of the concatenated batch split back with chunk, pseudo-labels from the detached weak
logits masked by a confidence threshold, SGD with nesterov, a cosine LambdaLR stepped every
iteration, and model.zero_grad() after the step."""
import math
import os

import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
eval_step = int(os.environ.get("CG_STEPS", "200"))
batch_size, mu, threshold, lambda_u, T = 16, 3, 0.95, 1.0, 1.0

labeled_set = TensorDataset(torch.randn(160, 3, 16, 16), torch.randint(0, 10, (160,)))
unlabeled_set = TensorDataset(torch.randn(960, 3, 16, 16))
labeled_loader = DataLoader(labeled_set, batch_size=batch_size, shuffle=True, drop_last=True)
unlabeled_loader = DataLoader(unlabeled_set, batch_size=batch_size * mu, shuffle=True, drop_last=True)


def weak_aug(x):
    flip = torch.rand(x.size(0), 1, 1, 1, device=x.device) < 0.5
    return torch.where(flip, x.flip(3), x)


def strong_aug(x):
    x = weak_aug(x) + 0.3 * torch.randn_like(x)
    keep = (torch.rand(x.size(0), 1, x.size(2), x.size(3), device=x.device) > 0.25).float()
    return x * keep


def get_cosine_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, num_cycles=7. / 16.):
    def _lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        progress = float(current_step - num_warmup_steps) / float(max(1, num_training_steps - num_warmup_steps))
        return max(0., math.cos(math.pi * num_cycles * progress))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda)


model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.1),
                      nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.LeakyReLU(0.1),
                      nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.03, momentum=0.9, nesterov=True, weight_decay=5e-4)
scheduler = get_cosine_schedule_with_warmup(optimizer, 0, eval_step)

labeled_iter = iter(labeled_loader)
unlabeled_iter = iter(unlabeled_loader)
model.train()
for batch_idx in range(eval_step):
    try:
        inputs_x, targets_x = next(labeled_iter)
    except StopIteration:
        labeled_iter = iter(labeled_loader)
        inputs_x, targets_x = next(labeled_iter)
    try:
        (inputs_u,) = next(unlabeled_iter)
    except StopIteration:
        unlabeled_iter = iter(unlabeled_loader)
        (inputs_u,) = next(unlabeled_iter)
    inputs_x, targets_x, inputs_u = inputs_x.to(device), targets_x.to(device), inputs_u.to(device)
    inputs = torch.cat((weak_aug(inputs_x), weak_aug(inputs_u), strong_aug(inputs_u)))
    logits = model(inputs)
    logits_x = logits[:batch_size]
    logits_u_w, logits_u_s = logits[batch_size:].chunk(2)
    Lx = F.cross_entropy(logits_x, targets_x, reduction="mean")
    pseudo_label = torch.softmax(logits_u_w.detach() / T, dim=-1)
    max_probs, targets_u = torch.max(pseudo_label, dim=-1)
    mask = max_probs.ge(threshold).float()
    Lu = (F.cross_entropy(logits_u_s, targets_u, reduction="none") * mask).mean()
    loss = Lx + lambda_u * Lu
    loss.backward()
    optimizer.step()
    scheduler.step()
    model.zero_grad()
    if batch_idx % 50 == 0:
        print(f"iter {batch_idx} loss {loss.item():.4f} Lx {Lx.item():.4f} mask {mask.mean().item():.2f}")
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
