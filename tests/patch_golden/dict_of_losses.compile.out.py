"""A detector-style model whose forward returns a dict of losses (classification, box
regression, an objectness term); the loss is their sum, each logged every 50 steps."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                                      nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.cls, self.box, self.obj = nn.Linear(512, 6), nn.Linear(512, 4), nn.Linear(512, 1)

    def forward(self, images, labels, boxes):
        h = self.backbone(images)
        return {"cls": F.cross_entropy(self.cls(h), labels),
                "box": F.smooth_l1_loss(self.box(h), boxes),
                "obj": F.binary_cross_entropy_with_logits(self.obj(h).squeeze(-1), (labels > 0).float())}


model = TinyDetector().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
data = [(torch.randn(16, 3, 32, 32), torch.randint(0, 6, (16,)), torch.rand(16, 4)) for _ in range(steps)]

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step, (images, labels, boxes) in enumerate(data):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    images, labels, boxes = images.to(device), labels.to(device), boxes.to(device)
    losses = _cg_compiled_model(images, labels, boxes)
    loss = sum(losses.values())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} " + " ".join(f"{k} {v.item():.4f}" for k, v in losses.items()))

print(f"final loss {loss.item():.6f}")
