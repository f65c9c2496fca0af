"""A step written as a function, as JAX-style and Lightning-free PyTorch code often has it:
`train_step(model, optimizer, batch)` zeroes the gradients, runs the forward, the loss and the
backward, clips the gradients, steps AdamW and returns the loss tensor; `main()` calls it with
the batch as a keyword argument and keeps a detached copy of each loss for a running mean."""
import os

import torch
import torch.nn.functional as F
from torch import nn


def train_step(model, optimizer, batch):
    inputs, targets = batch
    optimizer.zero_grad(set_to_none=True)
    logits = model(inputs)
    loss = F.cross_entropy(logits, targets, label_smoothing=0.1)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.LayerNorm(128), nn.Linear(128, 128), nn.GELU(),
                          nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    batches = [(torch.randn(64, 32, device=device), torch.randint(0, 10, (64,), device=device)) for _ in range(16)]
    history = []
    for step in range(int(os.environ.get("CG_STEPS", "200"))):
        inputs, targets = batches[step % len(batches)]
        loss = train_step(model, optimizer, batch=(inputs, targets))
        history.append(loss.detach())
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}")
    print(f"final loss {loss.item():.6f} mean {torch.stack(history).mean().item():.6f}")


if __name__ == "__main__":
    main()
