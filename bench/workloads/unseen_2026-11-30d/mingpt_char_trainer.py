"""minGPT's Trainer shape for a char-level GPT (embedding, 2 transformer blocks, LM head): AdamW with
decay/no-decay groups, clip_grad_norm_, run() indexing a list of GPU batches by its iteration counter."""
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, pdrop):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(pdrop)
        self.resid_dropout = nn.Dropout(pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))
        self.n_head = n_head

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, pdrop):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, pdrop)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(pdrop))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size=65, block_size=128, n_layer=2, n_head=4, n_embd=128, pdrop=0.1):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(pdrop)
        self.h = nn.ModuleList(Block(n_embd, n_head, block_size, pdrop) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        decay, no_decay = set(), set()
        for mn, m in self.named_modules():
            for pn, _ in m.named_parameters(recurse=False):
                fpn = f"{mn}.{pn}" if mn else pn
                if pn.endswith("weight") and isinstance(m, nn.Linear):
                    decay.add(fpn)
                else:
                    no_decay.add(fpn)
        params = dict(self.named_parameters())
        groups = [{"params": [params[n] for n in sorted(decay)], "weight_decay": weight_decay},
                  {"params": [params[n] for n in sorted(no_decay)], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


class Trainer:
    def __init__(self, model, batches, max_iters, learning_rate=5e-4, weight_decay=0.1, grad_norm_clip=1.0):
        self.model = model
        self.batches = batches
        self.max_iters = max_iters
        self.grad_norm_clip = grad_norm_clip
        self.optimizer = model.configure_optimizers(weight_decay, learning_rate, (0.9, 0.95))

    def train_step(self, batch):
        x, y = batch
        _, loss = self.model(x, y)
        self.model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_norm_clip)
        self.optimizer.step()
        return loss

    def run(self):
        self.model.train()
        iter_num = 0
        while True:
            batch = self.batches[iter_num % len(self.batches)]
            loss = self.train_step(batch)
            if iter_num % 100 == 0:
                print(f"iter {iter_num}: train loss {loss.item():.5f}")
            iter_num += 1
            if iter_num >= self.max_iters:
                break


def make_char_batches(n_batches=24, batch_size=64, block_size=128, vocab_size=65):
    # a synthetic "text": a repeating random phrase with noise, so the char model has structure to learn
    phrase = torch.randint(0, vocab_size, (97,), device=device)
    text = phrase.repeat(400)
    noise = torch.rand(text.shape, device=device) < 0.1
    text = torch.where(noise, torch.randint_like(text, vocab_size), text)
    batches = []
    for _ in range(n_batches):
        ix = torch.randint(0, text.numel() - block_size - 1, (batch_size,), device=device)
        offsets = torch.arange(block_size, device=device)
        x = text[ix[:, None] + offsets]
        y = text[ix[:, None] + offsets + 1]
        batches.append((x, y))
    return batches


def main():
    torch.manual_seed(0)
    steps = int(os.environ.get("CG_STEPS", "600"))
    model = GPT().to(device)
    trainer = Trainer(model, make_char_batches(), max_iters=steps)
    trainer.run()
    print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))


if __name__ == "__main__":
    main()
