"""The workload zoo: parametrised training workloads that span launch-bound to compute-bound.

Every model's top-level children are tensor -> tensor modules called once per forward, so
each capture scope (submodule graphs, whole-model fwd/bwd, full iteration) applies to all.
``python bench/zoo.py --list`` prints them; ``bench/workloads/zoo_scripts/`` runs them as training scripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class Workload:
    name: str
    family: str
    build: object                  # () -> nn.Module
    batch: object                  # (device, generator) -> (x, y)
    optimizer: str = "sgd"         # sgd | adamw
    params: dict = field(default_factory=dict)


class MLP(nn.Module):
    def __init__(self, width, depth, out=16):
        super().__init__()
        self.stem = nn.Linear(width, width)
        self.body = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])
        self.head = nn.Linear(width, out)

    def forward(self, x):
        return self.head(self.body(self.stem(x)))


class CNN(nn.Module):
    def __init__(self, channels, blocks, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.ReLU())
        self.body = nn.Sequential(*[nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1),
                                                  nn.BatchNorm2d(channels), nn.ReLU()) for _ in range(blocks)])
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, classes))

    def forward(self, x):
        return self.head(self.body(self.stem(x)))


class GPT(nn.Module):
    def __init__(self, dim, layers, heads, vocab=256):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.blocks = nn.Sequential(*[nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True,
                                                                 norm_first=True) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


class UnrolledGRU(nn.Module):
    """A recurrent loop unrolled in Python: one cell call per time step."""

    def __init__(self, hidden):
        super().__init__()
        self.cell = nn.GRUCell(hidden, hidden)

    def forward(self, x):  # x: (time, batch, hidden)
        h = torch.zeros_like(x[0])
        for step in x.unbind(0):
            h = self.cell(step, h)
        return h


class RNNModel(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.encoder = nn.Linear(hidden, hidden)
        self.recurrent = UnrolledGRU(hidden)
        self.head = nn.Linear(hidden, 8)

    def forward(self, x):
        return self.head(self.recurrent(self.encoder(x)))


class EmbeddingModel(nn.Module):
    def __init__(self, vocab, dim, tables):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(vocab, dim) for _ in range(tables))
        self.mlp = nn.Sequential(nn.Linear(dim * tables, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, ids):  # ids: (batch, tables)
        return self.mlp(torch.cat([t(ids[:, i]) for i, t in enumerate(self.tables)], dim=1))


def _regression(shape, out):
    def batch(device, gen):
        return (torch.randn(*shape, device=device, generator=gen), torch.randn(shape[0], out, device=device,
                                                                               generator=gen))
    return batch


def _classification(shape, classes):
    def batch(device, gen):
        return (torch.randn(*shape, device=device, generator=gen),
                torch.randint(0, classes, (shape[0],), device=device, generator=gen))
    return batch


def _tokens(batch_size, seq, dim, vocab):
    def batch(device, gen):
        return (torch.randn(batch_size, seq, dim, device=device, generator=gen),
                torch.randint(0, vocab, (batch_size, seq), device=device, generator=gen))
    return batch


def _sequence(time, batch_size, hidden):
    def batch(device, gen):
        return (torch.randn(time, batch_size, hidden, device=device, generator=gen),
                torch.randn(batch_size, 8, device=device, generator=gen))
    return batch


def _ids(batch_size, tables, vocab):
    def batch(device, gen):
        return (torch.randint(0, vocab, (batch_size, tables), device=device, generator=gen),
                torch.randn(batch_size, 1, device=device, generator=gen))
    return batch


def build_zoo() -> list:
    zoo = []
    for i, (width, depth, batch) in enumerate([(256, 8, 64), (256, 16, 64), (512, 16, 256), (1024, 8, 1024),
                                               (128, 32, 32), (2048, 4, 2048), (256, 4, 16), (1024, 12, 128)]):
        zoo.append(Workload(f"mlp_w{width}_d{depth}_b{batch}", "mlp", lambda w=width, d=depth: MLP(w, d),
                            _regression((batch, width), 16), "adamw" if i % 2 else "sgd",
                            {"width": width, "depth": depth, "batch": batch}))
    for i, (ch, blocks, batch, size) in enumerate([(16, 4, 32, 32), (32, 8, 64, 32), (64, 4, 128, 32),
                                                   (16, 12, 8, 16), (128, 6, 256, 32)]):
        zoo.append(Workload(f"cnn_c{ch}_k{blocks}_b{batch}_s{size}", "cnn", lambda c=ch, k=blocks: CNN(c, k),
                            _classification((batch, 3, size, size), 10), "adamw" if i % 2 else "sgd",
                            {"channels": ch, "blocks": blocks, "batch": batch, "size": size}))
    for i, (dim, layers, heads, batch, seq) in enumerate([(128, 2, 4, 8, 64), (256, 4, 4, 8, 128),
                                                          (128, 6, 4, 4, 32), (512, 4, 8, 16, 256),
                                                          (256, 8, 8, 2, 64), (768, 6, 12, 16, 512)]):
        zoo.append(Workload(f"gpt_d{dim}_l{layers}_b{batch}_t{seq}", "transformer",
                            lambda d=dim, n=layers, h=heads: GPT(d, n, h), _tokens(batch, seq, dim, 256),
                            "adamw" if i % 2 == 0 else "sgd",
                            {"dim": dim, "layers": layers, "batch": batch, "seq": seq}))
    for i, (hidden, time, batch) in enumerate([(128, 16, 32), (256, 32, 64), (64, 64, 16), (1024, 8, 512)]):
        zoo.append(Workload(f"rnn_h{hidden}_t{time}_b{batch}", "rnn", lambda h=hidden: RNNModel(h),
                            _sequence(time, batch, hidden), "adamw" if i % 2 else "sgd",
                            {"hidden": hidden, "time": time, "batch": batch}))
    for i, (vocab, dim, tables, batch) in enumerate([(10000, 32, 8, 256), (50000, 64, 4, 1024),
                                                     (1000, 16, 16, 64), (100000, 128, 8, 4096)]):
        zoo.append(Workload(f"emb_v{vocab}_d{dim}_n{tables}_b{batch}", "embedding",
                            lambda v=vocab, d=dim, n=tables: EmbeddingModel(v, d, n), _ids(batch, tables, vocab),
                            "adamw" if i % 2 else "sgd", {"vocab": vocab, "dim": dim, "tables": tables, "batch": batch}))
    for i, (kind, a, b, c) in enumerate([("mlp", 8192, 4, 8192), ("mlp", 4096, 6, 8192),
                                         ("gpt", 2048, 4, 1024), ("cnn", 256, 8, 256)]):
        if kind == "mlp":
            zoo.append(Workload(f"large_mlp_w{a}_d{b}_b{c}", "large", lambda w=a, d=b: MLP(w, d),
                                _regression((c, a), 16), "adamw" if i % 2 else "sgd", {"width": a, "depth": b, "batch": c}))
        elif kind == "gpt":
            zoo.append(Workload(f"large_gpt_d{a}_l{b}_t{c}", "large", lambda d=a, n=b: GPT(d, n, 16),
                                _tokens(8, c, a, 256), "adamw", {"dim": a, "layers": b, "seq": c, "batch": 8}))
        else:
            zoo.append(Workload(f"large_cnn_c{a}_k{b}_b{c}", "large", lambda ch=a, k=b: CNN(ch, k),
                                _classification((c, 3, 64, 64), 10), "sgd", {"channels": a, "blocks": b, "batch": c}))
    return zoo


ZOO = {w.name: w for w in build_zoo()}

# Hugging Face models (transformers, built from a config: no download), trained as the
# Trainer does: dict batches from pinned host memory, gradient clipping, AdamW, and a linear
# warm-up schedule on some (patch reads the script, whose scheduler.step() keeps the optimizer
# step eager under full_iteration for all of them).
# bench/workloads/zoo_scripts/zoo_hf.py runs them; they are not in ZOO, whose models take
# tensors (every capture scope applies to those).
HF_ZOO = {
    "hf_bert_h64_l2_b8_t32": {"arch": "bert", "hidden": 64, "layers": 2, "heads": 2, "batch": 8, "seq": 32,
                              "scheduler": False},
    "hf_bert_h256_l4_b16_t128": {"arch": "bert", "hidden": 256, "layers": 4, "heads": 4, "batch": 16, "seq": 128,
                                 "scheduler": True},
    "hf_gpt2_d128_l4_b8_t64": {"arch": "gpt2", "hidden": 128, "layers": 4, "heads": 4, "batch": 8, "seq": 64,
                               "scheduler": True},
    "hf_gpt2_d512_l6_b8_t256": {"arch": "gpt2", "hidden": 512, "layers": 6, "heads": 8, "batch": 8, "seq": 256,
                                "scheduler": False},
    "hf_gpt2_d768_l12_b4_t512": {"arch": "gpt2", "hidden": 768, "layers": 12, "heads": 12, "batch": 4, "seq": 512,
                                 "scheduler": False},
}


def loss_for(workload: Workload):
    if workload.family in ("cnn",) or workload.name.startswith("large_cnn"):
        return nn.CrossEntropyLoss()
    if workload.family == "transformer" or workload.name.startswith("large_gpt"):
        ce = nn.CrossEntropyLoss()
        return lambda out, y: ce(out.flatten(0, 1), y.flatten())
    return nn.MSELoss()


if __name__ == "__main__":
    import sys

    if "--list" in sys.argv:
        for w in ZOO.values():
            print(f"{w.name:32s} {w.family:12s} {w.optimizer}")
        for name in HF_ZOO:
            print(f"{name:32s} {'hf':12s} adamw")
        print(f"{len(ZOO)} workloads, {len(HF_ZOO)} Hugging Face models", file=sys.stderr)
