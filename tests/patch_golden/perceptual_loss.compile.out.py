"""The fast-neural-style example's loop, small: an image transformation network trained with
a perceptual loss from a frozen feature network (its parameters do not require grad, but it
is left in train mode and called with grad enabled on both the output and the input)."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


def conv(i, o, stride=1):
    return nn.Sequential(nn.Conv2d(i, o, 3, stride, 1), nn.InstanceNorm2d(o, affine=True), nn.ReLU())


transformer = nn.Sequential(conv(3, 16), conv(16, 32, 2), conv(32, 32), nn.Upsample(scale_factor=2),
                            nn.Conv2d(32, 3, 3, 1, 1)).to(device)
features = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU()).to(device)
for p in features.parameters():
    p.requires_grad = False
optimizer = torch.optim.Adam(transformer.parameters(), lr=1e-3)
style = torch.rand(1, 3, 32, 32, device=device)


def gram(y):
    b, c, h, w = y.shape
    f = y.view(b, c, h * w)
    return f.bmm(f.transpose(1, 2)) / (c * h * w)


style_gram = gram(features(style))
images = [torch.rand(4, 3, 32, 32) for _ in range(steps)]

_cg_compiled_transformer = torch.compile(transformer, mode="reduce-overhead")  # cg-advise: scope compile
_cg_compiled_features = torch.compile(features, mode="reduce-overhead")  # cg-advise: scope compile

for step, x in enumerate(images):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x = x.to(device)
    optimizer.zero_grad()
    y = _cg_compiled_transformer(x)
    features_y, features_x = _cg_compiled_features(y), _cg_compiled_features(x)
    content_loss = nn.functional.mse_loss(features_y, features_x)
    style_loss = nn.functional.mse_loss(gram(features_y), style_gram.expand(x.size(0), -1, -1))
    loss = content_loss + 1e3 * style_loss
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} content {content_loss.item():.6f} style {style_loss.item():.6f}")

print(f"final loss {loss.item():.6f}")
