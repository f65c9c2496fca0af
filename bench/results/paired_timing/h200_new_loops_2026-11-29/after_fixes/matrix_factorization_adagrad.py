"""A recommender-systems tutorial's matrix factorisation: user and item nn.Embedding factors plus biases, a dot product, MSE on explicit ratings, Adagrad, mini-batches sliced from shuffled GPU index tensors each epoch."""
import os

import torch
from torch import nn


class MatrixFactorization(nn.Module):
    def __init__(self, n_users, n_items, n_factors=32):
        super().__init__()
        self.user_factors = nn.Embedding(n_users, n_factors)
        self.item_factors = nn.Embedding(n_items, n_factors)
        self.user_bias = nn.Embedding(n_users, 1)
        self.item_bias = nn.Embedding(n_items, 1)
        nn.init.normal_(self.user_factors.weight, std=0.05)
        nn.init.normal_(self.item_factors.weight, std=0.05)

    def forward(self, user, item):
        dot = (self.user_factors(user) * self.item_factors(item)).sum(dim=1)
        return dot + self.user_bias(user).squeeze(1) + self.item_bias(item).squeeze(1)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
n_users, n_items, batch_size, epochs = 2000, 1500, 1024, 2
per_epoch = max(1, steps // epochs)
n = per_epoch * batch_size
users = torch.randint(0, n_users, (n,), device=device)
items = torch.randint(0, n_items, (n,), device=device)
ratings = torch.randint(1, 6, (n,), device=device).float()
model = MatrixFactorization(n_users, n_items).to(device)
optimizer = torch.optim.Adagrad(model.parameters(), lr=0.05)
loss_fn = nn.MSELoss()

for epoch in range(epochs):
    perm = torch.randperm(n, device=device)
    for b in range(per_epoch):
        idx = perm[b * batch_size:(b + 1) * batch_size]
        optimizer.zero_grad()
        loss = loss_fn(model(users[idx], items[idx]), ratings[idx])
        loss.backward()
        optimizer.step()
        if b % 50 == 0:
            print(f"epoch {epoch} batch {b} rmse {loss.item() ** 0.5:.4f}")

print(f"final loss {loss.item():.6f}")
