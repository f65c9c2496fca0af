# avandekleut-style VAE: the encoder stores its KL term as self.kl in forward(); the loop adds autoencoder.encoder.kl
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class VariationalEncoder(nn.Module):
    def __init__(self, latent_dims):
        super().__init__()
        self.linear1 = nn.Linear(64, 128)
        self.linear2 = nn.Linear(128, latent_dims)
        self.linear3 = nn.Linear(128, latent_dims)
        self.kl = 0

    def forward(self, x):
        x = F.relu(self.linear1(x))
        mu = self.linear2(x)
        sigma = torch.exp(self.linear3(x))
        z = mu + sigma * torch.randn_like(mu)
        self.kl = (sigma ** 2 + mu ** 2 - torch.log(sigma) - 1 / 2).sum()
        return z


class Decoder(nn.Module):
    def __init__(self, latent_dims):
        super().__init__()
        self.linear1 = nn.Linear(latent_dims, 128)
        self.linear2 = nn.Linear(128, 64)

    def forward(self, z):
        return torch.sigmoid(self.linear2(F.relu(self.linear1(z))))


class VariationalAutoencoder(nn.Module):
    def __init__(self, latent_dims):
        super().__init__()
        self.encoder = VariationalEncoder(latent_dims)
        self.decoder = Decoder(latent_dims)

    def forward(self, x):
        return self.decoder(self.encoder(x))


def train(autoencoder, data, epochs=3):
    opt = torch.optim.Adam(autoencoder.parameters())
    for epoch in range(epochs):
        total = 0.0
        for x in data:
            x = x.to(device)
            opt.zero_grad()
            x_hat = autoencoder(x)
            loss = ((x - x_hat) ** 2).sum() + autoencoder.encoder.kl
            loss.backward()
            opt.step()
            total += loss.item()
        print(f"epoch {epoch} loss {total / len(data):.3f} kl {autoencoder.encoder.kl.item():.3f}")
    return autoencoder


vae = VariationalAutoencoder(latent_dims=4).to(device)
data = [torch.rand(32, 64) for _ in range(20)]
vae = train(vae, data)
print("encoder sigma-head bias sum", round(vae.encoder.linear3.bias.sum().item(), 4))
