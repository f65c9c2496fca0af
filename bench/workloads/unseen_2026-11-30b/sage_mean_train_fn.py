"""PyTorch Geometric's GraphSAGE example shape (examples/graph_sage_unsup-free, full-batch
node classification) without PyG: mean aggregation over a fixed random graph (a row-normalised
dense adjacency), a root weight beside it, dropout between the two layers; `train()` runs one
step and returns `float(loss)`, `test()` returns the three masks' accuracies."""
import os

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
num_nodes, num_features, num_classes = 2708, 128, 7
edge_index = torch.randint(0, num_nodes, (2, 10556))
adj = torch.zeros(num_nodes, num_nodes)
adj[edge_index[1], edge_index[0]] = 1.0
adj = (adj / adj.sum(1, keepdim=True).clamp(min=1)).to(device)
x = torch.randn(num_nodes, num_features, device=device)
y = torch.randint(0, num_classes, (num_nodes,), device=device)
perm = torch.randperm(num_nodes, device=device)
train_mask = torch.zeros(num_nodes, dtype=torch.bool, device=device)
val_mask, test_mask = torch.zeros_like(train_mask), torch.zeros_like(train_mask)
train_mask[perm[:140]], val_mask[perm[140:640]], test_mask[perm[1708:]] = True, True, True


class SAGEConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin_l = nn.Linear(in_channels, out_channels)
        self.lin_r = nn.Linear(in_channels, out_channels, bias=False)

    def forward(self, x, adj):
        return self.lin_l(adj @ x) + self.lin_r(x)


class SAGE(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.conv1, self.conv2 = SAGEConv(num_features, hidden), SAGEConv(hidden, num_classes)

    def forward(self, x, adj):
        x = F.relu(self.conv1(x, adj))
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, adj)


model = SAGE().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def train():
    model.train()
    optimizer.zero_grad()
    out = model(x, adj)
    loss = F.cross_entropy(out[train_mask], y[train_mask])
    loss.backward()
    optimizer.step()
    return float(loss)


@torch.no_grad()
def test():
    model.eval()
    pred = model(x, adj).argmax(dim=-1)
    return [int((pred[m] == y[m]).sum()) / int(m.sum()) for m in (train_mask, val_mask, test_mask)]


for epoch in range(1, int(os.environ.get("CG_STEPS", "600")) + 1):
    loss = train()
    if epoch % 100 == 0:
        train_acc, val_acc, test_acc = test()
        print(f"Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, Val: {val_acc:.4f}, Test: {test_acc:.4f}")
print(f"final loss {loss:.6f} test {test()[2]:.4f}")
