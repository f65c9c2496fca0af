"""A GRU sequence tagger whose training step is a function the loop calls with the model, the
optimizer and a batch of token ids; the loss is summed on the GPU and read every 100 steps."""
import os

import torch
import torch.nn.functional as F
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab=1000, tags=17, dim=128):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, dim, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * dim, tags)

    def forward(self, tokens):
        hidden, _ = self.gru(self.embed(tokens))
        return self.out(hidden)


def train_step(model, optimizer, tokens, tags):
    optimizer.zero_grad()
    logits = model(tokens)
    loss = F.cross_entropy(logits.flatten(0, 1), tags.flatten())
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()
    return loss.detach()


def main():
    torch.manual_seed(0)
    model = Tagger().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    batches = [(torch.randint(0, 1000, (32, 24), device="cuda"), torch.randint(0, 17, (32, 24), device="cuda"))
               for _ in range(16)]
    running = torch.zeros((), device="cuda")
    for step in range(int(os.environ.get("CG_STEPS", "400"))):
        tokens, tags = batches[step % len(batches)]
        running += train_step(model, optimizer, tokens, tags)
        if (step + 1) % 100 == 0:
            print(f"step {step + 1} mean loss {running.item() / 100:.4f}")
            running.zero_()


if __name__ == "__main__":
    main()
