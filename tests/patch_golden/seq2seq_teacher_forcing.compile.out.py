"""A GRU encoder-decoder on a copy task, teacher forcing chosen at random for each batch on
the host, the decoder unrolled in Python one token at a time."""
import os
import random

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
random.seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab, hidden, length = 20, 64, 8


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.GRU(hidden, hidden, batch_first=True)
        self.decoder = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, source, target, teacher_forcing):
        _, h = self.encoder(self.embed(source))
        h = h.squeeze(0)
        token = torch.zeros_like(target[:, 0])
        logits = []
        for t in range(target.size(1)):
            h = self.decoder(self.embed(token), h)
            step_logits = self.out(h)
            logits.append(step_logits)
            token = target[:, t] if teacher_forcing else step_logits.argmax(-1)
        return torch.stack(logits, dim=1)


model = Seq2Seq().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
sequences = torch.randint(1, vocab, (steps, 32, length))

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    source = sequences[step].to(device)
    teacher_forcing = random.random() < 0.5
    logits = _cg_compiled_model(source, source, teacher_forcing)
    loss = F.cross_entropy(logits.reshape(-1, vocab), source.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
