"""PyTorch Geometric's example loop (examples/gcn.py) without PyG: a two-layer GCN over a
fixed graph (a dense normalised adjacency), trained full-batch; `train()` runs one step and
returns `float(loss)`, `test()` reads the three masks' accuracies under no_grad, and the
epoch loop calls both and logs every 50 epochs. The training nodes are picked by their
positions (found once from the mask), as a graph needs: `out[train_mask]` is refused."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
nodes, features, classes = 1500, 96, 7
edges = torch.randint(0, nodes, (2, 8000))
adj = torch.zeros(nodes, nodes)
adj[edges[0], edges[1]] = 1.0
adj = ((adj + adj.t()) > 0).float() + torch.eye(nodes)
norm = adj.sum(1).rsqrt()
adj = (norm[:, None] * adj * norm[None, :]).to(device)
x = torch.randn(nodes, features, device=device)
y = torch.randint(0, classes, (nodes,), device=device)
split = torch.randperm(nodes, device=device)
train_mask, val_mask, test_mask = (torch.zeros(nodes, dtype=torch.bool, device=device) for _ in range(3))
train_mask[split[:140]], val_mask[split[140:640]], test_mask[split[640:]] = True, True, True
train_idx = train_mask.nonzero(as_tuple=True)[0]


class GCN(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.conv1, self.conv2 = nn.Linear(features, hidden), nn.Linear(hidden, classes)

    def forward(self, x, adj):
        x = F.relu(adj @ self.conv1(x))
        return adj @ self.conv2(x)


model = GCN().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def train():
    model.train()
    optimizer.zero_grad()
    out = model(x, adj)
    loss = F.cross_entropy(out[train_idx], y[train_idx])
    loss.backward()
    optimizer.step()
    return float(loss)


@torch.no_grad()
def test():
    model.eval()
    pred = model(x, adj).argmax(dim=-1)
    return [int((pred[mask] == y[mask]).sum()) / int(mask.sum()) for mask in (train_mask, val_mask, test_mask)]


epochs = int(os.environ.get("CG_STEPS", "200"))
for epoch in range(1, epochs + 1):
    loss = train()
    if epoch % 50 == 0:
        train_acc, val_acc, test_acc = test()
        print(f"Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, Val: {val_acc:.4f}, Test: {test_acc:.4f}")
print(f"final loss {loss:.6f}")
