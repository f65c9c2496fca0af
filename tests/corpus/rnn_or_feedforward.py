"""The word-language-model example as it is: the hidden state exists only for a recurrent model
(bound under an if before the loop, used under an if in it); a feed-forward model (CG_MODEL=MLP)
never binds it."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
ntokens, bptt, bsz, lr, clip = 100, 16, 8, 5.0, 0.25


class RNNModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Embedding(ntokens, 32)
        self.rnn = nn.LSTM(32, 64)
        self.decoder = nn.Linear(64, ntokens)

    def forward(self, data, hidden):
        output, hidden = self.rnn(self.encoder(data), hidden)
        return self.decoder(output).view(-1, ntokens), hidden

    def init_hidden(self, batch):
        weight = next(self.parameters())
        return (weight.new_zeros(1, batch, 64), weight.new_zeros(1, batch, 64))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


class MLPModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Embedding(ntokens, 32), nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, ntokens))

    def forward(self, data):
        return self.net(data).view(-1, ntokens)


kind = os.environ.get("CG_MODEL", "LSTM")
model = (RNNModel() if kind == "LSTM" else MLPModel()).to(device)
criterion = nn.NLLLoss()
train_data = torch.randint(0, ntokens, (int(os.environ.get("CG_STEPS", "200")) * bptt + 1, bsz), device=device)


def train():
    model.train()
    total_loss = 0.0
    if kind != "MLP":
        hidden = model.init_hidden(bsz)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        if kind == "MLP":
            output = model(data)
        else:
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
        loss = criterion(torch.log_softmax(output, dim=-1), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % 50 == 49:
            print(f"batch {batch + 1} loss {total_loss / 50:.5f}")
            total_loss = 0.0
    return loss


print(f"final loss {train().item():.6f}")
