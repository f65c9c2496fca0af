"""A nanoGPT/char-level shape (Karpathy's shakespeare_char config, scaled down): token embedding plus learned positions, hand-written causal self-attention blocks (one nn.Linear for q, k, v, F.scaled_dot_product_attention(is_causal=True)), AdamW with decay/no-decay groups split by parameter dim, warmup + cosine lr set by hand on every param group, 2 micro-steps of gradient accumulation, clip_grad_norm_(1.0), get_batch() sampling random offsets of one long token tensor on the device."""
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab_size, block_size, n_embd, n_head, n_layer = 65, 128, 256, 4, 2
batch_size, accum_steps = 8, 2
learning_rate, min_lr, warmup_iters = 1e-3, 1e-4, max(1, steps // 10)
data = torch.randint(0, vocab_size, (200_000,), device=device)


def get_batch():
    ix = torch.randint(len(data) - block_size - 1, (batch_size,), device=device)
    offsets = ix[:, None] + torch.arange(block_size, device=device)
    return data[offsets], data[offsets + 1]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd), nn.Dropout(0.1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp(self.ln_2(x))


class CharGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.blocks = nn.Sequential(*[Block() for _ in range(n_layer)])
        self.ln_f, self.lm_head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab_size)

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.size(1), device=idx.device))
        return self.lm_head(self.ln_f(self.blocks(x)))


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / warmup_iters
    ratio = (it - warmup_iters) / max(1, steps - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


model = CharGPT().to(device)
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=learning_rate, betas=(0.9, 0.99))

model.train()
for it in range(steps):
    lr = get_lr(it)
    for g in optimizer.param_groups:
        g["lr"] = lr
    for micro_step in range(accum_steps):  # noqa: B007 (as the public loop writes it)
        xb, yb = get_batch()
        logits = model(xb)
        loss = F.cross_entropy(logits.view(-1, vocab_size), yb.view(-1))
        (loss / accum_steps).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if it % 50 == 0:
        print(f"iter {it} loss {loss.item():.4f} lr {lr:.2e}")
print(f"final loss {loss.item():.6f}")
