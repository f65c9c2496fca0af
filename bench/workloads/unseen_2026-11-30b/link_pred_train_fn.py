"""PyTorch Geometric's link prediction example shape (examples/link_pred.py) without PyG: a
two-layer GCN encoder over a fixed graph (a dense normalised adjacency), dot-product decoding
of positive edges and of as many negative edges drawn on the GPU at each step; `train()`
returns the loss tensor, `test()` reads a ranking accuracy on held-out edges every 100 epochs."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
num_nodes, num_features = 2000, 64
edges = torch.randint(0, num_nodes, (2, 12000))
adj = torch.zeros(num_nodes, num_nodes)
adj[edges[0], edges[1]] = 1.0
adj = ((adj + adj.t()) > 0).float() + torch.eye(num_nodes)
deg = adj.sum(1).rsqrt()
adj = (deg[:, None] * adj * deg[None, :]).to(device)
x = torch.randn(num_nodes, num_features, device=device)
train_pos = edges[:, :10000].to(device)
test_pos = edges[:, 10000:].to(device)
test_neg = torch.randint(0, num_nodes, (2, 2000), device=device)


class Net(nn.Module):
    def __init__(self, hidden=128, out=64):
        super().__init__()
        self.conv1, self.conv2 = nn.Linear(num_features, hidden), nn.Linear(hidden, out)

    def encode(self, x, adj):
        return adj @ self.conv2(F.relu(adj @ self.conv1(x)))

    def decode(self, z, edge_index):
        return (z[edge_index[0]] * z[edge_index[1]]).sum(dim=-1)

    def forward(self, x, adj, edge_index):
        return self.decode(self.encode(x, adj), edge_index)


model = Net().to(device)
optimizer = torch.optim.Adam(params=model.parameters(), lr=0.01)
criterion = nn.BCEWithLogitsLoss()


def train():
    model.train()
    optimizer.zero_grad()
    neg = torch.randint(0, num_nodes, train_pos.shape, device=device)
    edge_label_index = torch.cat([train_pos, neg], dim=-1)
    edge_label = torch.cat([torch.ones(train_pos.size(1), device=device), torch.zeros(neg.size(1), device=device)])
    out = model(x, adj, edge_label_index)
    loss = criterion(out, edge_label)
    loss.backward()
    optimizer.step()
    return loss


@torch.no_grad()
def test():
    model.eval()
    z = model.encode(x, adj)
    return (model.decode(z, test_pos) > model.decode(z, test_neg)).float().mean().item()


for epoch in range(1, int(os.environ.get("CG_STEPS", "600")) + 1):
    loss = train()
    if epoch % 100 == 0:
        print(f"Epoch: {epoch:03d}, Loss: {loss.item():.4f}, Test: {test():.4f}")
print(f"final loss {loss.item():.6f} test {test():.4f}")
