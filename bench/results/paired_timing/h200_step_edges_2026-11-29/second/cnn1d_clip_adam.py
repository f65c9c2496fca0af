"""A 1-D CNN sequence-classification tutorial: two small Conv1d layers (kernel 3) over short random sequences, then flatten and a Linear head, CrossEntropyLoss, Adam, clip_grad_norm_ to 1.0 between backward and step."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "600"))
epochs, batch_size, channels, seq_len, num_classes = 3, 16, 4, 32, 3
per_epoch = max(1, steps // epochs)
seqs = torch.randn(per_epoch, batch_size, channels, seq_len, device=device)
targets = seqs[:, :, 0, :].mean(dim=-1).mul(4).round().clamp(-1, 1).long() + 1
model = nn.Sequential(
    nn.Conv1d(channels, 8, kernel_size=3, padding=1), nn.ReLU(),
    nn.Conv1d(8, 8, kernel_size=3, padding=1), nn.ReLU(),
    nn.Flatten(),
    nn.Linear(8 * seq_len, num_classes)).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

for epoch in range(epochs):
    for x, y in zip(seqs, targets):
        optimizer.zero_grad()
        out = model(x)
        loss = criterion(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
