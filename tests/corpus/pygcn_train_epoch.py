"""Kipf's pygcn (train.py) with a dense adjacency: GraphConvolution layers (input @ weight,
then adj @ support, plus bias), dropout, log_softmax and NLL over index tensors; `train(epoch)`
takes the time, runs the step, then (unless fastmode) evaluates in eval mode, computes the
validation loss and accuracy with the script's `accuracy()` and prints every epoch's figures
with `.item()`; the loop calls it once an epoch and `test()` runs at the end."""
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(42)
device = "cuda" if torch.cuda.is_available() else "cpu"
fastmode, epochs = False, int(os.environ.get("CG_STEPS", "200"))
n, nfeat, nclass = 2708, 256, 7
features = torch.rand(n, nfeat).gt(0.95).float()
features = features / features.sum(1, keepdim=True).clamp(min=1)
edges = torch.randint(0, n, (2, 5429))
adj = torch.zeros(n, n)
adj[edges[0], edges[1]] = 1.0
adj = ((adj + adj.t()) > 0).float() + torch.eye(n)
adj = adj / adj.sum(1, keepdim=True)
labels = torch.randint(0, nclass, (n,))
idx_train, idx_val, idx_test = torch.arange(140), torch.arange(200, 500), torch.arange(500, 1500)
features, adj, labels = features.to(device), adj.to(device), labels.to(device)
idx_train, idx_val, idx_test = idx_train.to(device), idx_val.to(device), idx_test.to(device)


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        stdv = 1.0 / math.sqrt(out_features)
        self.weight.data.uniform_(-stdv, stdv)
        self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        return torch.mm(adj, support) + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1, self.gc2, self.dropout = GraphConvolution(nfeat, nhid), GraphConvolution(nhid, nclass), dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    correct = preds.eq(labels).double()
    return correct.sum() / len(labels)


model = GCN(nfeat=nfeat, nhid=16, nclass=nclass, dropout=0.5).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def train(epoch):
    t = time.time()
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    acc_train = accuracy(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()

    if not fastmode:
        model.eval()
        output = model(features, adj)

    loss_val = F.nll_loss(output[idx_val], labels[idx_val])
    acc_val = accuracy(output[idx_val], labels[idx_val])
    if epoch % 50 == 0:
        print(f"Epoch: {epoch + 1:04d} loss_train: {loss_train.item():.4f} acc_train: {acc_train.item():.4f} "
              f"loss_val: {loss_val.item():.4f} acc_val: {acc_val.item():.4f} time: {time.time() - t:.4f}s"[:-14])


def test():
    model.eval()
    output = model(features, adj)
    loss_test = F.nll_loss(output[idx_test], labels[idx_test])
    acc_test = accuracy(output[idx_test], labels[idx_test])
    print(f"Test set results: loss= {loss_test.item():.4f} accuracy= {acc_test.item():.4f}")


for epoch in range(epochs):
    train(epoch)
test()
