# truncated BPTT: a GRU-cell LM over one long stream, hidden carried between chunks of k steps and detached at each; reset each epoch
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

vocab, emb, hid, batch_size, k = 32, 32, 64, 16, 20
stream = torch.randint(0, vocab, (batch_size, 1010), device=device)
stream[:, 1::3] = (stream[:, 0::3][:, : stream[:, 1::3].size(1)] + 5) % vocab
source = stream.t().contiguous()   # (T, B)


class CellLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.cell = nn.GRUCell(emb, hid)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(hid, vocab)

    def forward(self, chunk, h):
        outs = []
        for t in range(chunk.size(0)):
            h = self.cell(self.embed(chunk[t]), h)
            outs.append(self.head(self.drop(h)))
        return torch.stack(outs), h

    def init_hidden(self, bsz):
        return torch.zeros(bsz, hid, device=device)


model = CellLM().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

chunks = 0
for epoch in range(3):
    model.train()
    hidden = model.init_hidden(batch_size)
    total_loss = 0.0
    for i in range(0, source.size(0) - 1, k):
        seq_len = min(k, source.size(0) - 1 - i)
        data = source[i:i + seq_len]
        target = source[i + 1:i + 1 + seq_len]
        hidden = hidden.detach()
        optimizer.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output.view(-1, vocab), target.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        total_loss += loss.item()
        chunks += 1
    print(f"epoch {epoch} loss {total_loss / ((source.size(0) - 1 + k - 1) // k):.4f}")

print("chunks", chunks)
print(f"final loss {loss.item():.4f}")
print("hidden norm", round(hidden.double().norm().item(), 4))
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
