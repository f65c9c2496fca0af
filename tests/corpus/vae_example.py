"""The PyTorch VAE example's loop: the model returns the reconstruction, mean and log-variance
(a reparameterisation draws noise inside the forward), a loss function of the script sums
binary cross-entropy and the KL term, and the epoch's loss is summed with loss.item()."""
import os

import torch
import torch.nn.functional as F
from torch import nn, optim

torch.manual_seed(1)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
log_interval, batch_size = 50, 32


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)
train_loader = [(torch.rand(batch_size, 1, 28, 28), torch.randint(0, 10, (batch_size,)))
                for _ in range(int(os.environ.get("CG_STEPS", "200")))]


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader) * batch_size}]"
                  f"\tLoss: {loss.item() / len(data):.6f}")
    print(f"====> Epoch: {epoch} Average loss: {train_loss / (len(train_loader) * batch_size):.4f}")


for epoch in range(1, 2):
    train(epoch)
