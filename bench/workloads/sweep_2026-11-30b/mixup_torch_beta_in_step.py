# mixup inside the step with lam = torch.distributions.Beta(alpha, alpha).sample() and a GPU randperm, as in common snippets
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"

alpha = 0.4
beta_dist = torch.distributions.Beta(torch.tensor([alpha]), torch.tensor([alpha]))
model = nn.Sequential(nn.Linear(48, 96), nn.ReLU(), nn.Linear(96, 96), nn.ReLU(), nn.Linear(96, 7)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
data = torch.randn(20, 64, 48, device=device)
target = torch.randint(0, 7, (20, 64), device=device)

lams = []
for epoch in range(3):
    for inputs, labels in zip(data, target):
        lam = beta_dist.sample().to(device)
        index = torch.randperm(inputs.size(0), device=device)
        mixed = lam * inputs + (1 - lam) * inputs[index]
        outputs = model(mixed)
        loss = lam * F.cross_entropy(outputs, labels) + (1 - lam) * F.cross_entropy(outputs, labels[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        lams.append(lam.item())
    print(f"epoch {epoch} loss {loss.item():.4f}")
print("mean lam", round(sum(lams) / len(lams), 4), "distinct lams", len(set(lams)))
print("param sum", round(sum(p.sum().item() for p in model.parameters()), 4))
