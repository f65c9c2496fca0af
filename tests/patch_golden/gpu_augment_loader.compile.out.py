"""A CIFAR-style loop that augments on the GPU after the loader (as in fast CIFAR trainers):
uint8 images from a DataLoader copied with non_blocking=True, then scaled, flipped at random
and jittered in brightness on the GPU, normalised with per-channel tensors; a small CNN, SGD
with Nesterov momentum, cross-entropy with label smoothing, running accuracy read each epoch."""
import os

import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
epochs, batch_size = 4, 64
per_epoch = max(steps // epochs, 1)
images = torch.randint(0, 256, (per_epoch * batch_size, 3, 32, 32), dtype=torch.uint8)
labels = torch.randint(0, 10, (per_epoch * batch_size,))
loader = DataLoader(TensorDataset(images, labels), batch_size=batch_size, shuffle=True, drop_last=True,
                    pin_memory=device == "cuda")
mean = torch.tensor([0.49, 0.48, 0.45], device=device).view(1, 3, 1, 1)
std = torch.tensor([0.25, 0.24, 0.26], device=device).view(1, 3, 1, 1)

model = nn.Sequential(
    nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
    nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.BatchNorm2d(64), nn.ReLU(),
    nn.Conv2d(64, 128, 3, padding=1, stride=2), nn.BatchNorm2d(128), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for epoch in range(epochs):
    model.train()
    correct, seen = 0, 0
    for x, y in loader:
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        x = x.float() / 255
        flip = torch.rand(x.size(0), 1, 1, 1, device=device) < 0.5
        x = torch.where(flip, x.flip(3), x)
        x = x * (1 + 0.2 * (torch.rand(x.size(0), 1, 1, 1, device=device) - 0.5))
        x = (x - mean) / std
        out = _cg_compiled_model(x)
        loss = F.cross_entropy(out, y, label_smoothing=0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        correct += (out.argmax(1) == y).sum().item()
        seen += y.size(0)
    print(f"epoch {epoch} loss {loss.item():.4f} acc {correct / seen:.4f}")

print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
