"""The PyTorch "Translation with a Sequence to Sequence Network" tutorial's shape, batched: EncoderRNN (embedding + GRU) and DecoderRNN (embedding, ReLU, GRU, Linear, log_softmax), a train(input, target, encoder, decoder, enc_opt, dec_opt, criterion) function that unrolls the decoder for 8 target steps with teacher forcing, sums NLLLoss over the steps and returns loss.item() / target_len; two SGD optimizers."""
import os

import torch
from torch import nn, optim

SOS_token, target_len = 0, 8


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)

    def forward(self, input):
        return self.gru(self.embedding(input))


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        output, hidden = self.gru(torch.relu(self.embedding(input)), hidden)
        return torch.log_softmax(self.out(output[:, 0]), dim=1), hidden


def train(input_tensor, target_tensor, encoder, decoder, encoder_optimizer, decoder_optimizer, criterion):
    encoder_optimizer.zero_grad()
    decoder_optimizer.zero_grad()
    _, encoder_hidden = encoder(input_tensor)
    decoder_input = torch.full((input_tensor.size(0), 1), SOS_token, dtype=torch.long, device=input_tensor.device)
    decoder_hidden = encoder_hidden
    loss = 0
    for di in range(target_len):
        decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden)
        loss += criterion(decoder_output, target_tensor[:, di])
        decoder_input = target_tensor[:, di:di + 1]  # teacher forcing
    loss.backward()
    encoder_optimizer.step()
    decoder_optimizer.step()
    return loss.item() / target_len


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
input_lang, output_lang, hidden_size, batch_size, pairs = 120, 100, 128, 32, 32
inputs = torch.randint(1, input_lang, (pairs, batch_size, 10), device=device)
targets = (inputs[:, :, :target_len] * 7) % (output_lang - 1) + 1

encoder = EncoderRNN(input_lang, hidden_size).to(device)
decoder = DecoderRNN(hidden_size, output_lang).to(device)
encoder_optimizer = optim.SGD(encoder.parameters(), lr=0.2)
decoder_optimizer = optim.SGD(decoder.parameters(), lr=0.2)
criterion = nn.NLLLoss()

print_loss_total = 0.0
for iter in range(1, steps + 1):
    loss = train(inputs[iter % pairs], targets[iter % pairs], encoder, decoder, encoder_optimizer, decoder_optimizer, criterion)
    print_loss_total += loss
    if iter % 50 == 0:
        print(f"iter {iter} avg loss {print_loss_total / 50:.4f}")
        print_loss_total = 0.0

print(f"final loss {loss:.6f}")
