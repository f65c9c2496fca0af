# tqdm loop with pbar.set_postfix(loss=..., grad_norm=...) and the largest clip_grad_norm_ norm kept with max()
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class tqdm:  # stand-in for tqdm.tqdm: iterates and keeps the postfix
    def __init__(self, iterable, desc=""):
        self.iterable, self.desc, self.postfix = iterable, desc, {}

    def __iter__(self):
        return iter(self.iterable)

    def set_postfix(self, **kwargs):
        self.postfix = kwargs

    def close(self):
        print(self.desc, self.postfix)


model = nn.Sequential(nn.Linear(32, 128), nn.Tanh(), nn.Linear(128, 128), nn.Tanh(), nn.Linear(128, 5)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
batches = [(torch.randn(64, 32, device=device) * 3, torch.randint(0, 5, (64,), device=device)) for _ in range(25)]

max_grad_norm = 0.0
for epoch in range(3):
    pbar = tqdm(batches, desc=f"epoch {epoch}")
    for inputs, targets in pbar:
        optimizer.zero_grad()
        logits = model(inputs)
        loss = F.cross_entropy(logits, targets, label_smoothing=0.1)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        max_grad_norm = max(max_grad_norm, grad_norm)
        pbar.set_postfix(loss=round(loss.item(), 4), grad_norm=round(grad_norm.item(), 4))
    pbar.close()
print("largest grad norm", round(float(max_grad_norm), 4))
print("final loss", round(loss.item(), 4))
