"""The time-sequence-prediction example's loop: an LSTM-cell sequence model fitted to sine
waves with L-BFGS, whose step calls a closure (forward, loss, backward) several times."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "40"))


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 32)
        self.lstm2 = nn.LSTMCell(32, 32)
        self.linear = nn.Linear(32, 1)

    def forward(self, input):
        h_t = c_t = torch.zeros(input.size(0), 32, device=input.device)
        h_t2 = c_t2 = torch.zeros(input.size(0), 32, device=input.device)
        outputs = []
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            outputs.append(self.linear(h_t2))
        return torch.cat(outputs, dim=1)


x = torch.linspace(0, 20, 41)
data = torch.sin(x.unsqueeze(0) + torch.rand(16, 1) * 6.28).to(device)
input, target = data[:, :-1], data[:, 1:]
seq = Sequence().to(device)
criterion = nn.MSELoss()
optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.5, max_iter=4)

for i in range(steps):
    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        loss.backward()
        return loss
    loss = optimizer.step(closure)
    if i % 10 == 0:
        print(f"step {i} loss {loss.item():.6f}")

print(f"final loss {criterion(seq(input), target).item():.6f}")
