"""A two-layer graph convolutional network trained full-batch on one fixed random graph (a
normalised sparse adjacency), the loss taken over the training nodes only."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
epochs = int(os.environ.get("CG_STEPS", "200"))
nodes, features, classes = 2000, 64, 7

edges = torch.randint(0, nodes, (2, 10000))
edges = torch.cat([edges, edges.flip(0), torch.arange(nodes).repeat(2, 1)], dim=1)
degree = torch.zeros(nodes).index_add_(0, edges[0], torch.ones(edges.size(1)))
weights = degree[edges[0]].rsqrt() * degree[edges[1]].rsqrt()
adjacency = torch.sparse_coo_tensor(edges, weights, (nodes, nodes)).coalesce().to(device)
x = torch.randn(nodes, features, device=device)
labels = torch.randint(0, classes, (nodes,), device=device)
train_idx = torch.randperm(nodes)[:500].to(device)


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.lin2 = nn.Linear(features, 32), nn.Linear(32, classes)

    def forward(self, x, adj):
        h = F.relu(torch.sparse.mm(adj, self.lin1(x)))
        h = F.dropout(h, 0.5, self.training)
        return torch.sparse.mm(adj, self.lin2(h))


model = GCN().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for epoch in range(epochs):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    model.train()
    optimizer.zero_grad()
    out = _cg_compiled_model(x, adjacency)
    loss = F.cross_entropy(out[train_idx], labels[train_idx])
    loss.backward()
    optimizer.step()
    if epoch % 50 == 0:
        print(f"epoch {epoch} loss {loss.item():.4f}")

print(f"final loss {loss.item():.6f}")
