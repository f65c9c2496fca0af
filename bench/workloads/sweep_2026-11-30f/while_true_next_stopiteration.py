# while True: loop that breaks at a global step count, batches from next(iterator) re-created on StopIteration (minGPT/nanoGPT-style LM)
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda"

vocab_size, block_size, n_embd = 64, 16, 64
tokens = torch.randint(0, vocab_size, (1000, block_size + 1))
tokens[:, 1::2] = (tokens[:, 0::2][:, : tokens[:, 1::2].size(1)] * 3 + 1) % vocab_size
train_ds = TensorDataset(tokens[:, :-1], tokens[:, 1:])
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = 4

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class TinyGPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd), nn.Dropout(0.1))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx):
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return self.lm_head(self.ln_f(x))


model = TinyGPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
max_iters = 300
grad_norm_clip = 1.0

data_iter = iter(train_loader)
iter_num = 0
epochs_seen = 0
while True:
    try:
        batch = next(data_iter)
    except StopIteration:
        data_iter = iter(train_loader)
        batch = next(data_iter)
        epochs_seen += 1
    x, y = [t.to(device) for t in batch]

    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    model.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_norm_clip)
    optimizer.step()

    iter_num += 1
    if iter_num % 50 == 0:
        print(f"iter {iter_num}: train loss {loss.item():.4f}")
    if iter_num >= max_iters:
        break

print("iters", iter_num, "epochs_seen", epochs_seen)
print(f"final loss {loss.item():.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
