"""A text-classification tutorial (fastText style): nn.Embedding over fixed-length token ids, mean over the sequence, a Linear head, CrossEntropyLoss, AdamW with weight decay and a StepLR stepped once per epoch."""
import os

import torch
from torch import nn


class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.fc = nn.Linear(embed_dim, num_class)

    def forward(self, tokens):
        return self.fc(self.embedding(tokens).mean(dim=1))


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "600"))
epochs, vocab_size, embed_dim, num_class, seq_len, batch_size = 5, 1000, 64, 4, 24, 16
per_epoch = max(1, steps // epochs)
tokens = torch.randint(0, vocab_size, (per_epoch, batch_size, seq_len), device=device)
labels = tokens[..., 0] % num_class
model = MeanEmbeddingClassifier(vocab_size, embed_dim, num_class).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

for epoch in range(epochs):
    model.train()
    for i in range(per_epoch):
        text, label = tokens[i], labels[i]
        optimizer.zero_grad()
        logits = model(text)
        loss = criterion(logits, label)
        loss.backward()
        optimizer.step()
    scheduler.step()
    print(f"epoch {epoch} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.1e}")

print(f"final loss {loss.item():.6f}")
