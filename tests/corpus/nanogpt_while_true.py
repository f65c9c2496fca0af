"""Karpathy's nanoGPT train.py: a tiny GPT (2 blocks of causal self-attention through
F.scaled_dot_product_attention(is_causal=True) and an MLP, LayerNorms, lm_head tied to the token
embedding) whose forward(idx, targets) returns (logits, loss); configure_optimizers() (decay and
no-decay groups by p.dim() >= 2, AdamW fused on cuda); get_batch() (seeded windows of a token
tensor); X, Y fetched before `while True:`; the lr set by hand on every param group (warmup +
cosine); estimate_loss() (@torch.no_grad(), eval()/train()) every eval_interval; micro-steps under
ctx (nullcontext on the CPU, bf16 autocast on cuda), the next batch fetched between forward and
backward, scaler.scale(loss).backward() (GradScaler enabled only for float16: off here), unscale_
+ clip_grad_norm_, scaler.step/update, zero_grad(set_to_none=True), a loss.item() log every
log_interval, and `if iter_num > max_iters: break`."""
import inspect
import math
import os
import time
from contextlib import nullcontext

import torch
from torch import nn
from torch.nn import functional as F

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
device_type = "cuda" if "cuda" in device else "cpu"
dtype = "bfloat16" if device_type == "cuda" else "float32"
max_iters = int(os.environ.get("CG_STEPS", "200"))
eval_interval, eval_iters, log_interval, gradient_accumulation_steps = max(1, max_iters // 4), 2, 10, 4
batch_size, block_size, vocab_size, n_embd, n_head, n_layer = 4, 16, 64, 32, 4, 2
learning_rate, min_lr, warmup_iters, lr_decay_iters, weight_decay, grad_clip = 1e-3, 1e-4, 10, max(max_iters, 11), 0.1, 1.0
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.autocast(device_type=device_type, dtype=ptdtype)
train_data, val_data = torch.randint(0, vocab_size, (20000,)), torch.randint(0, vocab_size, (2000,))
gen = torch.Generator().manual_seed(1337)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def attn(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
        self.h, self.ln_f = nn.ModuleList(Block() for _ in range(n_layer)), nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return self.lm_head(x[:, [-1], :]), None

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        optim_groups = [{"params": [p for p in param_dict.values() if p.dim() >= 2], "weight_decay": weight_decay},
                        {"params": [p for p in param_dict.values() if p.dim() < 2], "weight_decay": 0.0}]
        use_fused = "fused" in inspect.signature(torch.optim.AdamW).parameters and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=gen)
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    if device_type == "cuda":
        return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    return x.to(device), y.to(device)


model = GPT().to(device)
scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (0.9, 0.95), device_type)


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    decay_ratio = min(1.0, (it - warmup_iters) / (lr_decay_iters - warmup_iters))
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (learning_rate - min_lr)


X, Y = get_batch("train")
t0, iter_num = time.time(), 0
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    if iter_num % eval_interval == 0:
        losses = estimate_loss()
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    for _micro_step in range(gradient_accumulation_steps):
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    t1 = time.time()
    dt, t0 = t1 - t0, t1  # timed as nanoGPT does; not printed, to keep the output deterministic
    if iter_num % log_interval == 0:
        lossf = loss.item() * gradient_accumulation_steps
        print(f"iter {iter_num}: loss {lossf:.4f}")
    iter_num += 1
    if iter_num > max_iters:
        break
print(f"final loss {loss.item() * gradient_accumulation_steps:.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
