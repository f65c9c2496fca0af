import torch
from torch import nn


def train(model, loader, epochs):
    optim = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()
    model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for epoch in range(epochs):
        for batch_idx, (images, targets) in enumerate(loader):
            optim.zero_grad()
            logits = model(images)
            loss = loss_fn(logits, targets)
            loss.backward()
            optim.step()
            if batch_idx % 10 == 0:
                print(f"epoch {epoch} step {batch_idx} loss {loss.item():.4f}")
    model.eval()
    with torch.no_grad():
        for images, _ in loader:
            model(images)


def evaluate(model, loader):
    return sum(model(x).sum() for x, _ in loader)
