"""A tiny vision transformer (patch embedding, class token, pre-norm encoder layers), label
smoothing, AdamW and a linear warm-up set by a LambdaLR stepped every batch."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class ViT(nn.Module):
    def __init__(self, width=96, depth=3, patch=4, classes=10):
        super().__init__()
        self.patches = nn.Conv2d(3, width, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.position = nn.Parameter(torch.randn(1, 1 + (32 // patch) ** 2, width) * 0.02)
        layer = nn.TransformerEncoderLayer(width, 3, 2 * width, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, images):
        tokens = self.patches(images).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(tokens.size(0), -1, -1), tokens], dim=1) + self.position
        return self.head(self.norm(self.encoder(tokens)[:, 0]))


model = ViT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
warmup = 50
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
data = [(torch.randn(32, 3, 32, 32), torch.randint(0, 10, (32,))) for _ in range(steps)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step, (images, labels) in enumerate(data):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    images, labels = images.to(device), labels.to(device)
    loss = F.cross_entropy(_cg_compiled_model(images), labels, label_smoothing=0.1)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
