"""A sentiment-analysis tutorial's LSTM classifier: embedding, 2-layer LSTM, the last layer's final hidden state into a linear head, Adam, StepLR stepped once per epoch."""
import os

import torch
from torch import nn


class LSTMClassifier(nn.Module):
    def __init__(self, vocab_size=1000, embed_dim=64, hidden_dim=128, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_dim, num_layers=2, batch_first=True, dropout=0.2)
        self.fc = nn.Linear(hidden_dim, num_classes)

    def forward(self, text):
        _, (hidden, _) = self.lstm(self.embedding(text))
        return self.fc(hidden[-1])


def main():
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    steps = int(os.environ.get("CG_STEPS", "200"))
    epochs, batch_size = 4, 32
    n = max(1, steps // epochs) * batch_size
    dataset = torch.utils.data.TensorDataset(torch.randint(0, 1000, (n, 40)), torch.randint(0, 2, (n,)))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=True, drop_last=True)
    model = LSTMClassifier().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for epoch in range(epochs):
        model.train()
        for i, (text, label) in enumerate(loader):
            text, label = text.to(device), label.to(device)
            optimizer.zero_grad()
            loss = criterion(model(text), label)
            loss.backward()
            optimizer.step()
            if i % 20 == 0:
                print(f"epoch {epoch} batch {i} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")
        scheduler.step()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
