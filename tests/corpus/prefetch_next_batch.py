"""nanoGPT's prefetch: the next batch is fetched on the host in the middle of the step
(after the forward, while the GPU works) and carried into the next iteration."""
import os

import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
np.random.seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
block, vocab = 32, 64
data = np.random.randint(0, vocab, size=20000).astype(np.int64)
model = nn.Sequential(nn.Embedding(vocab, 48), nn.Linear(48, 96), nn.GELU(), nn.Linear(96, vocab)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)


def get_batch():
    ix = np.random.randint(0, len(data) - block - 1, size=16)
    x = torch.from_numpy(np.stack([data[i:i + block] for i in ix]))
    y = torch.from_numpy(np.stack([data[i + 1:i + 1 + block] for i in ix]))
    return x.to(device), y.to(device)


X, Y = get_batch()
for it in range(int(os.environ.get("CG_STEPS", "200"))):
    logits = model(X)
    loss = nn.functional.cross_entropy(logits.view(-1, vocab), Y.view(-1))
    X, Y = get_batch()  # prefetch the next batch while the GPU runs the forward
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

print(f"final loss {loss.item():.6f}")
