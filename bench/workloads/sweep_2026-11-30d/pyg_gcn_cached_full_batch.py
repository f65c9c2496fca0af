# pyg-team/pytorch_geometric examples/gcn.py: full-batch GCN with GCNConv(cached=True) computing gcn_norm on its first call and caching it on the module, Adam with per-layer weight-decay groups, train() returning float(loss), @torch.no_grad() test() over train/val/test masks, best-val test accuracy, log(Epoch=..., Loss=...)
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('--hidden_channels', type=int, default=16)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--epochs', type=int, default=200)
args = parser.parse_args()

device = "cuda"
torch.manual_seed(0)


class Data:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)

    def to(self, device):
        for key, value in self.__dict__.items():
            if torch.is_tensor(value):
                setattr(self, key, value.to(device))
        return self


def synthetic_citation_graph(num_nodes=800, num_classes=7, num_features=128, avg_degree=4):
    """Cora-like: bag-of-words features correlated with the class, mostly intra-class edges, 20 train nodes per class."""
    y = torch.randint(0, num_classes, (num_nodes,))
    centers = (torch.rand(num_classes, num_features) < 0.08).float()
    x = ((centers[y] + (torch.rand(num_nodes, num_features) < 0.04).float()) > 0).float()
    src = torch.randint(0, num_nodes, (num_nodes * avg_degree // 2,))
    same = torch.rand(src.numel()) < 0.8
    perm = torch.argsort(y)
    starts = torch.searchsorted(y[perm], y[src])
    counts = torch.bincount(y, minlength=num_classes)[y[src]]
    intra = perm[starts + (torch.rand(src.numel()) * counts).long()]
    dst = torch.where(same, intra, torch.randint(0, num_nodes, (src.numel(),)))
    keep = src != dst
    edge_index = torch.stack([torch.cat([src[keep], dst[keep]]), torch.cat([dst[keep], src[keep]])])
    train_mask = torch.zeros(num_nodes, dtype=torch.bool)
    for c in range(num_classes):
        train_mask[(y == c).nonzero().view(-1)[:20]] = True
    rest = (~train_mask).nonzero().view(-1)
    val_mask = torch.zeros(num_nodes, dtype=torch.bool)
    val_mask[rest[:200]] = True
    test_mask = torch.zeros(num_nodes, dtype=torch.bool)
    test_mask[rest[200:500]] = True
    # NormalizeFeatures()
    x = x / x.sum(1, keepdim=True).clamp(min=1)
    return Data(x=x, edge_index=edge_index, edge_attr=None, y=y, train_mask=train_mask, val_mask=val_mask,
                test_mask=test_mask, num_features=num_features, num_classes=num_classes, num_nodes=num_nodes)


def gcn_norm(edge_index, edge_weight, num_nodes, add_self_loops=True):
    if edge_weight is None:
        edge_weight = torch.ones(edge_index.size(1), device=edge_index.device)
    if add_self_loops:
        loop = torch.arange(num_nodes, device=edge_index.device)
        edge_index = torch.cat([edge_index, torch.stack([loop, loop])], dim=1)
        edge_weight = torch.cat([edge_weight, torch.ones(num_nodes, device=edge_weight.device)])
    row, col = edge_index[0], edge_index[1]
    deg = torch.zeros(num_nodes, device=edge_weight.device).scatter_add_(0, col, edge_weight)
    deg_inv_sqrt = deg.pow_(-0.5)
    deg_inv_sqrt.masked_fill_(deg_inv_sqrt == float('inf'), 0)
    return edge_index, deg_inv_sqrt[row] * edge_weight * deg_inv_sqrt[col]


class GCNConv(nn.Module):
    def __init__(self, in_channels, out_channels, cached=False, normalize=True):
        super().__init__()
        self.cached = cached
        self.normalize = normalize
        self._cached_edge_index = None
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))
        nn.init.xavier_uniform_(self.lin.weight)

    def forward(self, x, edge_index, edge_weight=None):
        if self.normalize:
            cache = self._cached_edge_index
            if cache is None:
                edge_index, edge_weight = gcn_norm(edge_index, edge_weight, x.size(0))
                if self.cached:
                    self._cached_edge_index = (edge_index, edge_weight)
            else:
                edge_index, edge_weight = cache[0], cache[1]
        x = self.lin(x)
        row, col = edge_index[0], edge_index[1]
        out = torch.zeros_like(x).index_add_(0, col, x[row] * edge_weight.view(-1, 1))
        return out + self.bias


class GCN(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels, cached=True, normalize=True)
        self.conv2 = GCNConv(hidden_channels, out_channels, cached=True, normalize=True)

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, edge_index, edge_weight).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv2(x, edge_index, edge_weight)
        return x


def log(**kwargs):
    print(', '.join(f'{key}: {value:03d}' if isinstance(value, int) else f'{key}: {value:.4f}'
                    for key, value in kwargs.items()))


data = synthetic_citation_graph().to(device)
model = GCN(data.num_features, args.hidden_channels, data.num_classes).to(device)
optimizer = torch.optim.Adam([
    dict(params=model.conv1.parameters(), weight_decay=5e-4),
    dict(params=model.conv2.parameters(), weight_decay=0)
], lr=args.lr)  # Only perform weight-decay on first convolution.


def train():
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index, data.edge_attr)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    return float(loss)


@torch.no_grad()
def test():
    model.eval()
    pred = model(data.x, data.edge_index, data.edge_attr).argmax(dim=-1)

    accs = []
    for mask in [data.train_mask, data.val_mask, data.test_mask]:
        accs.append(int((pred[mask] == data.y[mask]).sum()) / int(mask.sum()))
    return accs


best_val_acc = test_acc = 0
for epoch in range(1, args.epochs + 1):
    loss = train()
    train_acc, val_acc, tmp_test_acc = test()
    if val_acc > best_val_acc:
        best_val_acc = val_acc
        test_acc = tmp_test_acc
    if epoch % 20 == 0:
        log(Epoch=epoch, Loss=loss, Train=train_acc, Val=val_acc, Test=test_acc)
checksum = sum(p.double().sum() for p in model.parameters()).item()
print(f"final loss {loss:.4f} best val {best_val_acc:.4f} test {test_acc:.4f} checksum {checksum:.4f}")
