# curriculum learning: the sequence length grows every epoch (8, 12, 16, 20, 24), so the batch shape changes between epochs
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class SeqClassifier(nn.Module):
    def __init__(self, vocab=50, dim=32, classes=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        return self.head(h[:, -1])


model = SeqClassifier().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

max_len = 24
data = torch.randint(0, 50, (40, 32, max_len), device=device)
labels = (data[:, :, :8].sum(-1) % 5)

total = 0
for epoch in range(5):
    seq_len = min(8 + 4 * epoch, max_len)   # the curriculum: longer sequences each epoch
    model.train()
    running = 0.0
    for i in range(data.size(0)):
        x = data[i, :, :seq_len]
        y = labels[i]
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        running += loss.detach()
        total += 1
    print(f"epoch {epoch} seq_len {seq_len} mean loss {(running / data.size(0)).item():.4f}")

print("steps", total, "final loss", round(loss.item(), 4))
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
