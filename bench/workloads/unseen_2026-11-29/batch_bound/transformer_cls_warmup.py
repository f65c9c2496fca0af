"""A text-classification tutorial's tiny Transformer: a learned [CLS] token, a 2-layer nn.TransformerEncoder (batch_first, d_model 64), AdamW, a LambdaLR linear warm-up and decay stepped every batch, clip_grad_norm_."""
import os

import torch
from torch import nn


class TransformerClassifier(nn.Module):
    def __init__(self, vocab_size=2000, d_model=64, seq_len=48, num_classes=4):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(1, seq_len + 1, d_model))
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, ids):
        x = torch.cat([self.cls.expand(ids.size(0), -1, -1), self.tok(ids)], dim=1) + self.pos
        return self.head(self.encoder(x)[:, 0])


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
warmup = max(1, steps // 10)
inputs = torch.randint(0, 2000, (steps, 32, 48), device=device)
targets = torch.randint(0, 4, (steps, 32), device=device)
model = TransformerClassifier().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / max(1, steps - warmup)))
criterion = nn.CrossEntropyLoss()

model.train()
for step in range(steps):
    x, y = inputs[step], targets[step]
    logits = model(x)
    loss = criterion(logits, y)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    if step % 25 == 0:
        print(f"step {step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")

print(f"final loss {loss.item():.6f}")
