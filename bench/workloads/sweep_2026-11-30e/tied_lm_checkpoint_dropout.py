# a tiny LM whose decoder weight is tied to the embedding (lm_head.weight = tok_emb.weight) and whose blocks run under torch.utils.checkpoint.checkpoint in forward, with dropout inside
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

torch.manual_seed(0)
device = "cuda"


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln(x)))))


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, n_layer=3, ctx=16, grad_ckpt=True):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d)
        self.pos_emb = nn.Parameter(torch.zeros(1, ctx, d))
        self.blocks = nn.ModuleList([Block(d) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.tok_emb.weight   # weight tying
        self.grad_ckpt = grad_ckpt

    def forward(self, idx, targets=None):
        x = self.tok_emb(idx) + self.pos_emb[:, : idx.size(1)]
        for block in self.blocks:
            if self.grad_ckpt and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


model = TinyLM().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
data = torch.randint(0, 64, (200, 16, 17), device=device)

for it in range(data.size(0)):
    batch = data[it]
    x, y = batch[:, :-1], batch[:, 1:]
    logits, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if it % 50 == 0:
        print(f"iter {it} loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    _, val_loss = model(data[0, :, :-1], data[0, :, 1:])
print("final loss", round(loss.item(), 4), "val loss", round(val_loss.item(), 4))
print("tied", model.lm_head.weight is model.tok_emb.weight)
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
