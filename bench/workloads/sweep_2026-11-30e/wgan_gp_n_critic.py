# WGAN-GP (eriklindernoren/PyTorch-GAN wgan_gp.py shape): gradient penalty by autograd.grad(create_graph=True) on interpolates, generator stepped if i % n_critic == 0
import torch
import torch.autograd as autograd
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

latent_dim = 16
data_dim = 32
n_critic = 5
lambda_gp = 10


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(latent_dim, 64), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(64, 64), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(64, data_dim), nn.Tanh(),
        )

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(
            nn.Linear(data_dim, 64), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(64, 32), nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(32, 1),
        )

    def forward(self, x):
        return self.model(x)


def compute_gradient_penalty(D, real_samples, fake_samples):
    alpha = torch.rand(real_samples.size(0), 1, device=real_samples.device)
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = torch.ones(real_samples.shape[0], 1, device=real_samples.device)
    gradients = autograd.grad(
        outputs=d_interpolates, inputs=interpolates, grad_outputs=fake,
        create_graph=True, retain_graph=True, only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


generator = Generator().to(device)
discriminator = Discriminator().to(device)
optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))

dataset = torch.tanh(torch.randn(50, 64, data_dim, device=device) * 0.7 + 0.3)
batches_done = 0
g_steps = 0
for epoch in range(4):
    for i, real_imgs in enumerate(dataset):
        # ---------------------
        #  Train Discriminator
        # ---------------------
        optimizer_D.zero_grad()
        z = torch.randn(real_imgs.shape[0], latent_dim, device=device)
        fake_imgs = generator(z)
        real_validity = discriminator(real_imgs)
        fake_validity = discriminator(fake_imgs)
        gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data, fake_imgs.data)
        d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty
        d_loss.backward()
        optimizer_D.step()

        optimizer_G.zero_grad()
        # Train the generator every n_critic steps
        if i % n_critic == 0:
            fake_imgs = generator(z)
            fake_validity = discriminator(fake_imgs)
            g_loss = -torch.mean(fake_validity)
            g_loss.backward()
            optimizer_G.step()
            g_steps += 1
        batches_done += 1
    print(f"[Epoch {epoch}] [D loss: {d_loss.item():.4f}] [G loss: {g_loss.item():.4f}]")

print("batches", batches_done, "g_steps", g_steps)
print("G checksum", round(sum(p.double().sum() for p in generator.parameters()).item(), 4))
print("D checksum", round(sum(p.double().sum() for p in discriminator.parameters()).item(), 4))
