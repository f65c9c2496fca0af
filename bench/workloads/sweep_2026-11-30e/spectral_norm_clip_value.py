# nn.utils.parametrizations.spectral_norm on every linear layer (its forward updates the _u/_v power-iteration buffers in place) and clip_grad_value_
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.parametrizations import spectral_norm

torch.manual_seed(0)
device = "cuda"


class SNClassifier(nn.Module):
    def __init__(self, d_in=20, hidden=64, classes=3):
        super().__init__()
        self.fc1 = spectral_norm(nn.Linear(d_in, hidden))
        self.fc2 = spectral_norm(nn.Linear(hidden, hidden))
        self.out = spectral_norm(nn.Linear(hidden, classes))

    def forward(self, x):
        x = F.leaky_relu(self.fc1(x), 0.2)
        x = F.leaky_relu(self.fc2(x), 0.2)
        return self.out(x)


model = SNClassifier().to(device)
optimizer = torch.optim.RMSprop(model.parameters(), lr=5e-4, alpha=0.9)
criterion = nn.CrossEntropyLoss()

X = torch.randn(50, 64, 20, device=device)
Y = (X[..., :3] * torch.tensor([1.0, -2.0, 0.5], device=device)).argmax(-1)

for epoch in range(4):
    model.train()
    for i in range(X.size(0)):
        optimizer.zero_grad()
        loss = criterion(model(X[i]), Y[i])
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

model.eval()
with torch.no_grad():
    acc = (model(X.flatten(0, 1)).argmax(-1) == Y.flatten()).float().mean().item()
    sigma = torch.linalg.matrix_norm(model.fc2.weight, ord=2).item()
u_sum = sum(m.parametrizations.weight[0]._u.double().sum().item() for m in (model.fc1, model.fc2, model.out))
print("eval acc", round(acc, 4), "fc2 sigma", round(sigma, 4), "u checksum", round(u_sum, 4))
print("param checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
