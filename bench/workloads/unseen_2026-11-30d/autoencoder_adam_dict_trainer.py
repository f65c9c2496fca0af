"""A research-repo autoencoder Trainer (MSE reconstruction, Adam) whose train_step returns a metrics
dict {"loss": loss.detach()} the epoch loop sums on the GPU, as in many representation-learning repos."""
import os

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class AutoEncoder(nn.Module):
    def __init__(self, d_in=784, hidden=(512, 256, 128), latent=32):
        super().__init__()
        enc, width = [], d_in
        for h in hidden:
            enc += [nn.Linear(width, h), nn.SiLU()]
            width = h
        enc.append(nn.Linear(width, latent))
        dec, width = [], latent
        for h in reversed(hidden):
            dec += [nn.Linear(width, h), nn.SiLU()]
            width = h
        dec.append(nn.Linear(width, d_in))
        self.encoder = nn.Sequential(*enc)
        self.decoder = nn.Sequential(*dec)

    def forward(self, x):
        return self.decoder(self.encoder(x))


class Trainer:
    def __init__(self, model, data, lr=1e-3, batch_size=128):
        self.model = model
        self.data = data
        self.batch_size = batch_size
        self.criterion = nn.MSELoss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def train_step(self, batch):
        self.optimizer.zero_grad()
        recon = self.model(batch)
        loss = self.criterion(recon, batch)
        loss.backward()
        self.optimizer.step()
        return {"loss": loss.detach()}

    def train_epoch(self, epoch, max_batches):
        self.model.train()
        metrics = {"loss": torch.zeros((), device=device)}
        n_batches = min(self.data.size(0) // self.batch_size, max_batches)
        for i in range(n_batches):
            batch = self.data[i * self.batch_size:(i + 1) * self.batch_size]
            out = self.train_step(batch)
            for key, value in out.items():
                metrics[key] += value
            if (i + 1) % 100 == 0:
                print(f"epoch {epoch} batch {i + 1} recon {out['loss'].item():.5f}")
        print(f"epoch {epoch} mean recon {(metrics['loss'] / n_batches).item():.5f}")
        return n_batches

    def fit(self, total_steps):
        done, epoch = 0, 0
        while done < total_steps:
            done += self.train_epoch(epoch, total_steps - done)
            epoch += 1


def main():
    torch.manual_seed(0)
    steps = int(os.environ.get("CG_STEPS", "600"))
    # low-rank synthetic "images" in [0, 1]: 128 batches of 128 flattened 28x28 inputs
    basis = torch.randn(16, 784, device=device)
    data = torch.sigmoid(torch.randn(128 * 128, 16, device=device) @ basis * 0.5)
    model = AutoEncoder().to(device)
    Trainer(model, data).fit(steps)
    print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))


if __name__ == "__main__":
    main()
