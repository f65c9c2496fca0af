# a token-level loss with reduction="sum" divided by the batch's Python int token count (n_tokens = int(mask.sum())), which differs from batch to batch under a fixed padded shape; the step returns loss.item()
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"
PAD = 0


class Tagger(nn.Module):
    def __init__(self, vocab=80, dim=48, tags=7):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.mix = nn.Conv1d(dim, dim, 3, padding=1)
        self.out = nn.Linear(dim, tags)

    def forward(self, tokens):
        h = self.emb(tokens)
        h = F.relu(self.mix(h.transpose(1, 2))).transpose(1, 2)
        return self.out(h)


model = Tagger().to(device)
optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)

n_batches, batch_size, max_len = 50, 16, 20
lengths = torch.randint(4, max_len + 1, (n_batches, batch_size))
positions = torch.arange(max_len)
mask = (positions < lengths[..., None]).to(device)
tokens = torch.randint(1, 80, (n_batches, batch_size, max_len), device=device) * mask
tags = torch.randint(0, 7, (n_batches, batch_size, max_len), device=device).masked_fill(~mask, -100)


def train_step(tok, tag, n_tokens):
    optimizer.zero_grad()
    logits = model(tok)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tag.reshape(-1), ignore_index=-100, reduction="sum")
    loss = loss / n_tokens
    loss.backward()
    optimizer.step()
    return loss.item()


total_tokens = 0
for epoch in range(6):
    epoch_loss = 0.0
    for b in range(n_batches):
        n_tokens = int(mask[b].sum())
        epoch_loss += train_step(tokens[b], tags[b], n_tokens) * n_tokens
        total_tokens += n_tokens
    print(f"epoch {epoch} token loss {epoch_loss / int(mask.sum()):.4f}")

print("tokens seen", total_tokens)
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
