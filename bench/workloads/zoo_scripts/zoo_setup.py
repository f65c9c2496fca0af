"""Shared set-up of the zoo training scripts: one zoo workload's model, loss and batches
(bench/zoo.py), seeded, with TF32 on as most training scripts have it. Each script builds
its optimizer itself, as training scripts do (patch reads its class there)."""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from zoo import ZOO, loss_for  # noqa: E402

OPTIMIZERS = {name: workload.optimizer for name, workload in ZOO.items()}


def arguments():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=sorted(ZOO))
    parser.add_argument("--steps", type=int, default=200)
    return parser.parse_args()


def make_optimizer(name, model):
    """The workload's optimizer (for a script whose optimizer step stays eager anyway: patch
    reads an optimizer's class only where the script builds it itself)."""
    if OPTIMIZERS[name] == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3)
    return torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)


def setup(name, device="cuda", batches=4):
    workload = ZOO[name]
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = workload.build().to(device)
    generator = torch.Generator(device=device).manual_seed(0)
    data = [workload.batch(device, generator) for _ in range(batches)]
    return model, loss_for(workload), data
