"""A SimCLR-style loop: two augmented views of each image through one encoder and projection
head, the NT-Xent loss over the batch's similarity matrix."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.projection = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, x):
        return self.projection(self.features(x))


def augment(x):
    flipped = torch.where(torch.rand(x.size(0), 1, 1, 1, device=x.device) < 0.5, x.flip(-1), x)
    return flipped + 0.1 * torch.randn_like(flipped)


def nt_xent(z1, z2, temperature=0.5):
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    similarity = z @ z.t() / temperature
    n = z1.size(0)
    similarity = similarity.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(z.device)
    return F.cross_entropy(similarity, targets)


model = Encoder().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
images = [torch.rand(32, 3, 16, 16) for _ in range(steps)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step, x in enumerate(images):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x = x.to(device)
    z1, z2 = _cg_compiled_model(augment(x)), _cg_compiled_model(augment(x))
    loss = nt_xent(z1, z2)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
