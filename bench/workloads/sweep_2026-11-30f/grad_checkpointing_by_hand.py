# HF-style model.gradient_checkpointing_enable() implemented by hand: torch.utils.checkpoint(block, h, use_reentrant=False) in forward when training
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)
device = "cuda"

vocab, dim, seq_len = 96, 64, 24


class MLPBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.dropout = nn.Dropout(0.1)

    def forward(self, h):
        return h + self.dropout(self.fc2(F.gelu(self.fc1(self.ln(h)))))


class TinyLM(nn.Module):
    def __init__(self, n_layer=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([MLPBlock() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab)
        self.gradient_checkpointing = False

    def gradient_checkpointing_enable(self):
        self.gradient_checkpointing = True

    def forward(self, input_ids, labels=None):
        h = self.embed(input_ids)
        for block in self.blocks:
            if self.gradient_checkpointing and self.training:
                h = checkpoint(block, h, use_reentrant=False)
            else:
                h = block(h)
        logits = self.lm_head(self.ln_f(h))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, vocab), labels.reshape(-1))
        return {"loss": loss, "logits": logits}


data = torch.randint(0, vocab, (40, 16, seq_len + 1), device=device)
data[..., 1:] = (data[..., :-1] * 7 + 3) % vocab

model = TinyLM().to(device)
model.gradient_checkpointing_enable()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)

step = 0
for _epoch in range(4):
    model.train()
    for chunk in data:
        batch = {"input_ids": chunk[:, :-1], "labels": chunk[:, 1:]}
        outputs = model(**batch)
        loss = outputs["loss"]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step += 1
        if step % 40 == 0:
            print(f"step {step} loss {loss.item():.4f}")

print("steps", step)
print(f"final loss {loss.item():.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
