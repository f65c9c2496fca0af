"""A character/word-level GRU language model as in many blog posts: tied input/output embeddings, truncated BPTT over one long token stream with the hidden state detached every step, Adam, clip_grad_norm_."""
import os

import torch
from torch import nn


class GRULanguageModel(nn.Module):
    def __init__(self, vocab_size=500, dim=128, num_layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.gru = nn.GRU(dim, dim, num_layers=num_layers, batch_first=True, dropout=0.1)
        self.out = nn.Linear(dim, vocab_size)
        self.out.weight = self.embed.weight

    def forward(self, x, hidden):
        output, hidden = self.gru(self.embed(x), hidden)
        return self.out(output), hidden


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab_size, batch_size, bptt = 500, 20, 25
stream = torch.randint(0, vocab_size, (batch_size, steps * bptt + 1), device=device)
model = GRULanguageModel(vocab_size).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
criterion = nn.CrossEntropyLoss()
hidden = torch.zeros(2, batch_size, 128, device=device)

model.train()
for step in range(steps):
    x = stream[:, step * bptt:(step + 1) * bptt]
    y = stream[:, step * bptt + 1:(step + 1) * bptt + 1]
    hidden = hidden.detach()
    optimizer.zero_grad()
    logits, hidden = model(x, hidden)
    loss = criterion(logits.reshape(-1, vocab_size), y.reshape(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f} ppl {torch.exp(loss).item():.1f}")

print(f"final loss {loss.item():.6f}")
