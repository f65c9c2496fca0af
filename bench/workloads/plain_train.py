"""A training loop written the plain way (what `tune` and `patch` rewrite): MLP, CNN or
small transformer, SGD or AdamW, synthetic batches, optional AMP and loss logging.

    python bench/workloads/plain_train.py --model mlp --steps 200 [--optimizer adamw] [--log-every 50]
"""
import argparse

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--model", choices=["mlp", "cnn", "gpt"], default="mlp")
parser.add_argument("--width", type=int, default=256)
parser.add_argument("--depth", type=int, default=16)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
parser.add_argument("--log-every", type=int, default=0)
parser.add_argument("--device", default="cuda")
args = parser.parse_args()

if args.model == "mlp":
    layers = [m for _ in range(args.depth) for m in (nn.Linear(args.width, args.width), nn.ReLU())]
    model = nn.Sequential(nn.Linear(args.width, args.width), *layers, nn.Linear(args.width, 10)).to(args.device)
    inputs = [torch.randn(args.batch, args.width, device=args.device) for _ in range(8)]
elif args.model == "cnn":
    blocks = [nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()) for _ in range(args.depth)]
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(32, 10)).to(args.device)
    inputs = [torch.randn(args.batch, 3, 32, 32, device=args.device) for _ in range(8)]
else:
    block = nn.TransformerEncoderLayer(args.width, 4, 4 * args.width, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.TransformerEncoder(block, args.depth), nn.Flatten(), nn.LazyLinear(10)).to(args.device)
    inputs = [torch.randn(args.batch, 16, args.width, device=args.device) for _ in range(8)]
    model(inputs[0])  # materialise the lazy layer
targets = [torch.randint(0, 10, (args.batch,), device=args.device) for _ in range(8)]
criterion = nn.CrossEntropyLoss()
if args.optimizer == "adamw":
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
else:
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

for step in range(args.steps):
    x, y = inputs[step % 8], targets[step % 8]
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    if args.log_every and step % args.log_every == 0:
        print(f"step {step} loss {loss.item():.4f}")
