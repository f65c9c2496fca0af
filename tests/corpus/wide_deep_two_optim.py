"""A Wide & Deep recommender: a wide linear part as an EmbeddingBag(mode="sum") over a fixed
number of cross-feature ids per row, a deep MLP over dense embeddings of the categorical
fields, SGD for the wide parameters and Adam for the deep ones (both zeroed and stepped every
step), BCEWithLogitsLoss, and the loss summed as a GPU tensor, read once after the loop."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
n_cross, ids_per_row, field_sizes, emb_dim, batch_size = 10000, 8, [100, 50, 200, 30], 16, 256


class WideAndDeep(nn.Module):
    def __init__(self):
        super().__init__()
        self.wide = nn.EmbeddingBag(n_cross, 1, mode="sum")
        nn.init.zeros_(self.wide.weight)
        self.wide_bias = nn.Parameter(torch.zeros(1))
        self.embeddings = nn.ModuleList([nn.Embedding(size, emb_dim) for size in field_sizes])
        self.deep = nn.Sequential(nn.Linear(len(field_sizes) * emb_dim, 128), nn.ReLU(),
                                  nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, cross_ids, fields):
        wide = self.wide(cross_ids) + self.wide_bias
        dense = torch.cat([emb(fields[:, i]) for i, emb in enumerate(self.embeddings)], dim=1)
        return (wide + self.deep(dense)).squeeze(1)


model = WideAndDeep().to(device)
wide_params = list(model.wide.parameters()) + [model.wide_bias]
deep_params = list(model.embeddings.parameters()) + list(model.deep.parameters())
wide_optimizer = torch.optim.SGD(wide_params, lr=0.05)
deep_optimizer = torch.optim.Adam(deep_params, lr=1e-3)
criterion = nn.BCEWithLogitsLoss()

cross = torch.randint(0, n_cross, (steps, batch_size, ids_per_row), device=device)
fields = torch.stack([torch.randint(0, s, (steps, batch_size), device=device) for s in field_sizes], dim=2)
clicks = (torch.rand(steps, batch_size, device=device) < 0.3).float()

total = torch.zeros((), device=device)
for step in range(steps):
    ids, fx, y = cross[step], fields[step], clicks[step]
    logits = model(ids, fx)
    loss = criterion(logits, y)
    wide_optimizer.zero_grad()
    deep_optimizer.zero_grad()
    loss.backward()
    wide_optimizer.step()
    deep_optimizer.step()
    total = total + loss.detach()

checksum = sum(p.double().sum().item() for p in model.parameters())
print(f"mean loss {(total / steps).item():.6f} last {loss.item():.6f} checksum {checksum:.6f}")
