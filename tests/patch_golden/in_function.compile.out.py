import torch
from torch import nn


def train(model, loader, epochs):
    optim = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for epoch in range(epochs):
        for batch_idx, (images, targets) in enumerate(loader):
            torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
            optim.zero_grad()
            logits = _cg_compiled_model(images)
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


if __name__ == "__main__":
    net = torch.nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10)).cuda()
    data = [(torch.randn(16, 3, 8, 8, device="cuda"), torch.randint(0, 10, (16,), device="cuda")) for _ in range(100)]
    train(net, data, epochs=2)
