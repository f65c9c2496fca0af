"""A guard found in several public training loops: clip_grad_norm_ returns the total norm,
and when it is not finite the step is skipped (zero_grad(set_to_none=True), a counter,
`continue`) before optimizer.step(). The model is a small nn.TransformerEncoder classifier
(batch_first=True) with a linear-warmup LambdaLR stepped every iteration; the loss is weighted
per sample, and one batch of the data carries a corrupted (infinite) weight, so some steps
are skipped."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab, seq_len, d_model, num_classes, batch_size = 200, 16, 64, 4, 32


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens):
        h = self.encoder(self.embed(tokens) + self.pos)
        return self.head(h.mean(dim=1))


def make_batch(corrupted=False):
    tokens = torch.randint(0, vocab, (batch_size, seq_len))
    labels = (tokens[:, :4].sum(dim=1) % num_classes)
    weights = torch.ones(batch_size)
    if corrupted:
        weights[3] = float("inf")
    return tokens.to(device), labels.to(device), weights.to(device)


model = TextClassifier().to(device)
criterion = nn.CrossEntropyLoss(reduction="none")
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
warmup = 20
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))
batches = [make_batch(corrupted=i == 7) for i in range(25)]

skipped = 0
model.train()
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    tokens, labels, weights = batches[step % len(batches)]
    logits = _cg_compiled_model(tokens)
    loss = (criterion(logits, labels) * weights).mean()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    if not torch.isfinite(grad_norm):
        optimizer.zero_grad(set_to_none=True)
        skipped += 1
        continue
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f} grad_norm {grad_norm.item():.3f}")

print(f"skipped {skipped}")
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
