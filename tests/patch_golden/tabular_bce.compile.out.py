"""A tabular binary classifier as in Kaggle notebooks: embeddings of three categorical columns
concatenated with numeric features, Linear+ReLU+BatchNorm1d blocks and one logit,
BCEWithLogitsLoss with pos_weight and AdamW; mini-batches sliced by hand from GPU tensors
through a torch.randperm index made once an epoch, epoch_loss += loss.item() * xb.size(0)."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
epochs, bs = 5, 256
n = steps // epochs * bs
cardinalities, emb_dims, n_numeric = [12, 7, 40], [4, 3, 8], 10


class TabularNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(c, d) for c, d in zip(cardinalities, emb_dims)])
        layers, width = [], sum(emb_dims) + n_numeric
        for hidden in (128, 64, 32):
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.BatchNorm1d(hidden)]
            width = hidden
        self.layers = nn.Sequential(*layers)
        self.out = nn.Linear(width, 1)

    def forward(self, x_cat, x_num):
        embedded = [emb(x_cat[:, i]) for i, emb in enumerate(self.embeddings)]
        x = torch.cat(embedded + [x_num], dim=1)
        return self.out(self.layers(x)).squeeze(1)


x_cat = torch.stack([torch.randint(0, c, (n,)) for c in cardinalities], dim=1).to(device)
x_num = torch.randn(n, n_numeric).to(device)
y = (torch.rand(n) < 0.2).float().to(device)

model = TabularNet().to(device)
criterion = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([4.0], device=device))
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for epoch in range(epochs):
    model.train()
    epoch_loss = 0.0
    perm = torch.randperm(n, device=device)
    for i in range(0, n, bs):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        idx = perm[i:i + bs]
        cb, xb, yb = x_cat[idx], x_num[idx], y[idx]
        logits = _cg_compiled_model(cb, xb)
        loss = criterion(logits, yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        epoch_loss += loss.item() * xb.size(0)
    print(f"epoch {epoch} loss {epoch_loss / n:.6f}")

checksum = sum(p.double().sum().item() for p in model.parameters())
print(f"final loss {loss.item():.6f} checksum {checksum:.6f}")
