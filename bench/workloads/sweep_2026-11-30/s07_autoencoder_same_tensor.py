# Autoencoder step function called with the same tensor as input and target; input clipped in place
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"


def train_step(model, optimizer, inputs, targets):
    inputs.clamp_(-1.0, 1.0)
    optimizer.zero_grad()
    recon = model(inputs)
    loss = nn.functional.mse_loss(recon, targets)
    loss.backward()
    optimizer.step()
    return loss


model = nn.Sequential(nn.Linear(24, 6), nn.Tanh(), nn.Linear(6, 24)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
data = torch.randn(512, 24, device=device) * 2
for epoch in range(5):
    perm = torch.randperm(512, device=device)
    for i in range(0, 512, 64):
        x = data[perm[i:i + 64]]
        loss = train_step(model, optimizer, x, x)
    print(f"epoch {epoch}: {loss.item():.5f}")
