# Denoising autoencoder: the loop's own step; inputs renormalised in place between backward and step
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"
encoder = nn.Sequential(nn.Linear(32, 8), nn.ReLU()).to(device)
decoder = nn.Sequential(nn.Linear(8, 32)).to(device)
params = list(encoder.parameters()) + list(decoder.parameters())
optimizer = torch.optim.Adam(params, lr=1e-3)
clean = torch.randn(256, 32, device=device)
noisy = clean + 0.3 * torch.randn_like(clean)

for it in range(100):
    idx = it % 8
    x = noisy[idx * 32:(idx + 1) * 32]
    target = clean[idx * 32:(idx + 1) * 32]
    optimizer.zero_grad()
    recon = decoder(encoder(x))
    loss = ((recon - target) ** 2).mean()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    # shrink the noise a little each time it is seen (curriculum)
    torch.lerp(x, target, 0.05, out=x)
    x.data.clamp_(-3, 3)
    target[:, :4] = target[:, :4].clamp(-1, 1)
    optimizer.step()
    if it % 25 == 0:
        print(it, loss.item())
print("residual noise", (noisy - clean).pow(2).mean().item())
print("target tail", clean[:, :4].abs().max().item())
