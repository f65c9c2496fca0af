"""A text classifier trained on batches padded to their longest sequence (a DataCollator's
dynamic padding, torchtext's bucket iterators): the batch's length changes from one step to
the next, so a CUDA graph captured for one shape replays for few steps."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab, width, pad = 1000, 64, 0


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, width, padding_idx=pad)
        layer = nn.TransformerEncoderLayer(width, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(width, 2)

    def forward(self, tokens, padding):
        hidden = self.encoder(self.embed(tokens), src_key_padding_mask=padding)
        kept = (~padding).unsqueeze(-1).float()
        return self.head((hidden * kept).sum(1) / kept.sum(1))


def batches(count, size=16):
    for _ in range(count):
        lengths = torch.randint(4, 48, (size,))
        tokens = torch.full((size, int(lengths.max())), pad, dtype=torch.long)
        for row, length in enumerate(lengths.tolist()):
            tokens[row, :length] = torch.randint(1, vocab, (length,))
        yield tokens, tokens == pad, torch.randint(0, 2, (size,))


model = Classifier().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = list(batches(steps))

for step, (tokens, padding, labels) in enumerate(data):
    tokens, padding, labels = tokens.to(device), padding.to(device), labels.to(device)
    loss = nn.functional.cross_entropy(model(tokens, padding), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 50 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
