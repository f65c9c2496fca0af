"""Kipf's pygcn example in plain PyTorch: a GraphConvolution layer (weight Parameter, uniform(-stdv, stdv) init, input @ weight then adj @ support, plus bias), a 2-layer GCN with dropout and log_softmax, a dense row-normalised adjacency with self-loops, full-batch node classification with boolean train/val masks, nll_loss, Adam(lr=0.01, weight_decay=5e-4); each optimizer step is one epoch through a train(epoch) function."""
import math
import os

import torch
import torch.nn.functional as F
from torch import nn


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        stdv = 1.0 / math.sqrt(out_features)
        self.weight.data.uniform_(-stdv, stdv)
        self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        return adj @ (input @ self.weight) + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1, self.gc2, self.dropout = GraphConvolution(nfeat, nhid), GraphConvolution(nhid, nclass), dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
n_nodes, n_feat, n_class, n_edges = 2708, 1433, 7, 5429
labels = torch.randint(0, n_class, (n_nodes,))
features = (torch.rand(n_nodes, n_feat) < 0.0127).float() + F.one_hot(labels * 200, n_feat).float()
features = features / features.sum(1, keepdim=True)
src, dst = torch.randint(0, n_nodes, (2, n_edges))
adj = torch.eye(n_nodes)
adj[src, dst] = 1.0
adj[dst, src] = 1.0
adj = adj / adj.sum(1, keepdim=True)
train_mask = torch.zeros(n_nodes, dtype=torch.bool)
train_mask[:140] = True
val_mask = torch.zeros(n_nodes, dtype=torch.bool)
val_mask[200:500] = True
features, adj, labels = features.to(device), adj.to(device), labels.to(device)
train_mask, val_mask = train_mask.to(device), val_mask.to(device)

model = GCN(n_feat, 16, n_class, 0.5).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def train(epoch):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[train_mask], labels[train_mask])
    loss_train.backward()
    optimizer.step()
    if epoch % 20 == 0:
        acc_val = (output[val_mask].argmax(1) == labels[val_mask]).float().mean()
        print(f"epoch {epoch + 1:04d} loss_train {loss_train.item():.4f} acc_val {acc_val.item():.4f}")
    return loss_train


for epoch in range(steps):
    loss = train(epoch)

print(f"final loss {loss.item():.6f}")
