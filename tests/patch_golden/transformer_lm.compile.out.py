"""A small Transformer language model (causal mask, output tied to the embedding), AdamW with
gradient clipping, on random token batches."""
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab, width, context = 1000, 128, 32


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(1, context, width))
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(width, vocab, bias=False)
        self.out.weight = self.embed.weight
        nn.init.normal_(self.embed.weight, std=0.02)

    def forward(self, tokens, mask):
        h = self.embed(tokens) * math.sqrt(width) + self.position
        return self.out(self.encoder(h, mask=mask, is_causal=True))


model = TinyLM().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
mask = nn.Transformer.generate_square_subsequent_mask(context).to(device)
corpus = torch.randint(0, vocab, (steps, 16, context + 1))

model.train()
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    chunk = corpus[step].to(device)
    inputs, targets = chunk[:, :-1], chunk[:, 1:]
    logits = _cg_compiled_model(inputs, mask)
    loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
