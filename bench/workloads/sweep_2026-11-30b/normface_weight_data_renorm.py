# NormFace/cosine-softmax classifier whose class weights are re-normalised after each step with `weight.data = F.normalize(...)`
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class CosineClassifier(nn.Module):
    def __init__(self, in_dim, n_classes, scale=16.0):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(in_dim, 64), nn.ReLU(), nn.Linear(64, 32))
        self.weight = nn.Parameter(F.normalize(torch.randn(n_classes, 32), dim=1))
        self.scale = scale

    def forward(self, x):
        emb = F.normalize(self.embed(x), dim=1)
        return self.scale * emb @ self.weight.t()


model = CosineClassifier(24, 6).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
centers = torch.randn(6, 24, device=device) * 2
labels = torch.randint(0, 6, (3, 20, 32), device=device)
inputs = centers[labels] + torch.randn(3, 20, 32, 24, device=device)

for epoch in range(3):
    for x, y in zip(inputs[epoch], labels[epoch]):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # keep the class prototypes on the unit sphere
        model.weight.data = F.normalize(model.weight.data, dim=1)
    print(f"epoch {epoch} loss {loss.item():.4f}")
print("weight sum", round(model.weight.sum().item(), 4), "embed sum", round(model.embed[0].weight.sum().item(), 4))
