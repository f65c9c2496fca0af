"""A recommender tutorial (two-tower / dot product): a user nn.Embedding and an item nn.Embedding, the (centred) rating predicted as their dot product, MSELoss against the ratings, plain Adam, the (user, item, rating) batch bound at the top of the loop body."""
import os

import torch
from torch import nn


class DotProductRecommender(nn.Module):
    def __init__(self, num_users, num_items, dim):
        super().__init__()
        self.user_emb = nn.Embedding(num_users, dim)
        self.item_emb = nn.Embedding(num_items, dim)
        nn.init.normal_(self.user_emb.weight, std=0.1)
        nn.init.normal_(self.item_emb.weight, std=0.1)

    def forward(self, users, items):
        return (self.user_emb(users) * self.item_emb(items)).sum(dim=1)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "600"))
num_users, num_items, dim, bank, batch_size = 200, 300, 16, 32, 64
users = torch.randint(0, num_users, (bank, batch_size), device=device)
items = torch.randint(0, num_items, (bank, batch_size), device=device)
true_u = torch.randn(num_users, 4, device=device)
true_i = torch.randn(num_items, 4, device=device)
ratings = (true_u[users] * true_i[items]).sum(dim=-1).clamp(-2.5, 2.5)
model = DotProductRecommender(num_users, num_items, dim).to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

for step in range(steps):
    u, it, r = users[step % bank], items[step % bank], ratings[step % bank]
    optimizer.zero_grad()
    pred = model(u, it)
    loss = criterion(pred, r)
    loss.backward()
    optimizer.step()
    if step % 200 == 0:
        print(f"step {step} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
