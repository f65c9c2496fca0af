"""A hand-updated loop (no optimizer object) that backs two losses an iteration, each after its
own forward: a reconstruction loss through the whole autoencoder, then a sparsity penalty on
the encoder's code for a second batch; the gradients add up, then every parameter is moved by
hand, as the word-language-model example moves them."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
encoder = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16)).to(device)
decoder = nn.Sequential(nn.Linear(16, 128), nn.ReLU(), nn.Linear(128, 64)).to(device)
lr = 0.05
batches = [torch.randn(32, 64, device=device) for _ in range(8)]

_cg_compiled_decoder = torch.compile(decoder, mode="reduce-overhead")  # cg-advise: scope compile
_cg_compiled_encoder = torch.compile(encoder, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    x, other = batches[step % 8], batches[(step + 3) % 8]
    encoder.zero_grad()
    decoder.zero_grad()
    reconstruction = nn.functional.mse_loss(_cg_compiled_decoder(_cg_compiled_encoder(x)), x)
    reconstruction.backward()
    sparsity = 1e-3 * _cg_compiled_encoder(other).abs().mean()
    sparsity.backward()
    with torch.no_grad():
        for p in [*encoder.parameters(), *decoder.parameters()]:
            p.add_(p.grad, alpha=-lr)
    if step % 50 == 49:
        print(f"step {step + 1} reconstruction {reconstruction.item():.5f} sparsity {sparsity.item():.6f}")
print(f"final {nn.functional.mse_loss(decoder(encoder(batches[0])), batches[0]).item():.6f}")
