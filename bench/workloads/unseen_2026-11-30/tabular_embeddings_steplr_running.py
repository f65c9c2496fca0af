"""A fastai-TabularModel-style classifier written in plain PyTorch: several nn.Embedding tables for the categorical columns concatenated (with embedding dropout) to BatchNorm1d-normalised continuous features, Linear-ReLU-BatchNorm1d-Dropout blocks, cross-entropy; SGD with momentum, StepLR stepped once per epoch, `for epoch ...: for i, (cat, cont, y) in enumerate(loader):` over a DataLoader of a three-tensor TensorDataset, and running_loss += loss.item() every step."""
import math
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TabularModel(nn.Module):
    def __init__(self, emb_szs, n_cont, out_sz, layers=(200, 100), ps=(0.1, 0.1), emb_drop=0.05):
        super().__init__()
        self.embeds = nn.ModuleList([nn.Embedding(ni, nf) for ni, nf in emb_szs])
        self.emb_drop = nn.Dropout(emb_drop)
        self.bn_cont = nn.BatchNorm1d(n_cont)
        blocks, n_in = [], sum(nf for _, nf in emb_szs) + n_cont
        for n_out, p in zip(layers, ps):
            blocks += [nn.Linear(n_in, n_out), nn.ReLU(inplace=True), nn.BatchNorm1d(n_out), nn.Dropout(p)]
            n_in = n_out
        self.layers = nn.Sequential(*blocks, nn.Linear(n_in, out_sz))

    def forward(self, x_cat, x_cont):
        x = torch.cat([e(x_cat[:, i]) for i, e in enumerate(self.embeds)], dim=1)
        x = torch.cat([self.emb_drop(x), self.bn_cont(x_cont)], dim=1)
        return self.layers(x)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
cardinalities, n_cont, n_rows, batch_size = [24, 7, 12, 50, 3], 6, 2048, 128
emb_szs = [(c, min(50, (c + 1) // 2)) for c in cardinalities]
cats = torch.stack([torch.randint(0, c, (n_rows,)) for c in cardinalities], dim=1)
conts = torch.randn(n_rows, n_cont) * 3 + 1
ys = ((cats[:, 0] % 3) + (conts[:, 0] > 1).long()) % 3
loader = DataLoader(TensorDataset(cats, conts, ys), batch_size=batch_size, shuffle=True)
epochs = math.ceil(steps / len(loader))

model = TabularModel(emb_szs, n_cont, 3).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)

step = 0
for epoch in range(epochs):
    model.train()
    running_loss = 0.0
    for i, (cat, cont, y) in enumerate(loader):  # noqa: B007 (as the public loop writes it)
        cat, cont, y = cat.to(device), cont.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(cat, cont), y)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        step += 1
        if step == steps:
            break
    scheduler.step()
    print(f"epoch {epoch} mean loss {running_loss / (i + 1):.4f} lr {scheduler.get_last_lr()[0]:.4f}")

print(f"final loss {loss.item():.6f}")
