"""The PyTorch "NLP From Scratch: Classifying Names with a Character-Level RNN" tutorial: a
hand-written RNN module (i2h, h2h and h2o Linear layers, tanh(i2h(input) + h2h(hidden)), a
LogSoftmax) with initHidden(); train(category_tensor, line_tensor) resets the hidden state,
calls rnn.zero_grad(), runs the RNN one character at a time in a Python loop over
line_tensor.size()[0] (names of VARYING length, 3 to 8 letters, so the loop's trip count
changes from call to call), NLLLoss on the last output, backward, then the update by hand
(p.data.add_(p.grad.data, alpha=-learning_rate)) and returns output, loss.item(); the main
loop `for iter in range(1, n_iters + 1)` picks a random example (seeded random), accumulates
current_loss and prints every print_every iterations."""
import os
import random
import string

import torch
from torch import nn

torch.manual_seed(0)
random.seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
n_iters = int(os.environ.get("CG_STEPS", "200"))
print_every, plot_every, learning_rate = max(1, n_iters // 4), max(1, n_iters // 10), 0.005
all_letters = string.ascii_letters + " .,;'"
n_letters, n_hidden = len(all_letters), 64
all_categories = ["Aaa", "Bbb", "Ccc", "Ddd"]
n_categories = len(all_categories)
# synthetic names: each category draws its letters from its own part of the alphabet
category_lines = {c: ["".join(random.choice(string.ascii_lowercase[6 * i:6 * i + 8]) for _ in range(random.randint(3, 8)))
                      .capitalize() for _ in range(20)] for i, c in enumerate(all_categories)}


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters, device=device)
    for li, letter in enumerate(line):
        tensor[li][0][all_letters.find(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size, hidden_size)
        self.h2h = nn.Linear(hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        hidden = torch.tanh(self.i2h(input) + self.h2h(hidden))
        output = self.softmax(self.h2o(hidden))
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size, device=device)


rnn = RNN(n_letters, n_hidden, n_categories).to(device)
criterion = nn.NLLLoss()
examples = {c: [lineToTensor(line) for line in lines] for c, lines in category_lines.items()}


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def randomTrainingExample():
    category = random.choice(all_categories)
    i = random.randint(0, len(category_lines[category]) - 1)
    category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long, device=device)
    return category, category_lines[category][i], category_tensor, examples[category][i]


def train(category_tensor, line_tensor):
    hidden = rnn.initHidden()
    rnn.zero_grad()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    loss = criterion(output, category_tensor)
    loss.backward()
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)
    return output, loss.item()


current_loss = 0
all_losses = []
for iter in range(1, n_iters + 1):
    category, line, category_tensor, line_tensor = randomTrainingExample()
    output, loss = train(category_tensor, line_tensor)
    current_loss += loss
    if iter % print_every == 0:
        guess, guess_i = categoryFromOutput(output)
        correct = "ok" if guess == category else f"wrong ({category})"
        print(f"{iter} {iter / n_iters * 100:.0f}% {loss:.4f} {line} / {guess} {correct}")
    if iter % plot_every == 0:
        all_losses.append(current_loss / plot_every)
        current_loss = 0
print(f"final loss {loss:.6f}")
print(f"checksum {sum(p.double().sum().item() for p in rnn.parameters()):.6f}")
