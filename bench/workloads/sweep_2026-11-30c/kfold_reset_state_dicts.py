# Kaggle k-fold cross-validation shape: one model/optimizer, reset per fold with load_state_dict of the initial states
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(nn.Linear(24, 64), nn.ReLU(), nn.Linear(64, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
init_model = copy.deepcopy(model.state_dict())
init_optimizer = copy.deepcopy(optimizer.state_dict())

X = torch.randn(4, 12, 32, 24, device=device)  # 4 folds of 12 batches
Y = X[..., :3].sum(-1, keepdim=True) + 0.1 * torch.randn(4, 12, 32, 1, device=device)
n_folds = 3
fold_scores = []
for fold in range(n_folds):
    model.load_state_dict(init_model)
    optimizer.load_state_dict(init_optimizer)
    val_fold = fold + 1
    for _epoch in range(2):
        model.train()
        for xb, yb in zip(X[fold], Y[fold]):
            optimizer.zero_grad()
            loss = F.mse_loss(model(xb), yb)
            loss.backward()
            optimizer.step()
    model.eval()
    with torch.no_grad():
        val = F.mse_loss(model(X[val_fold].flatten(0, 1)), Y[val_fold].flatten(0, 1)).item()
    fold_scores.append(val)
    print(f"fold {fold} last train loss {loss.item():.5f} val mse {val:.5f}")
print("cv mse", round(sum(fold_scores) / n_folds, 5))
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
