# bentrevett/pytorch-seq2seq tutorial 1: Encoder/Decoder LSTMs, Seq2Seq.forward(src, trg, teacher_forcing_ratio=0.5) unrolling the decoder with `teacher_force = random.random() < teacher_forcing_ratio`, train(model, iterator, optimizer, criterion, clip) / evaluate(..., model(src, trg, 0)), epoch_time, best state_dict saved
import io
import math
import random
import time

import torch
import torch.nn as nn
import torch.optim as optim

SEED = 1234
random.seed(SEED)
torch.manual_seed(SEED)
torch.backends.cudnn.deterministic = True

device = "cuda"


class Encoder(nn.Module):
    def __init__(self, input_dim, emb_dim, hid_dim, n_layers, dropout):
        super().__init__()
        self.hid_dim = hid_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(input_dim, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hid_dim, n_layers, dropout=dropout)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        # src = [src len, batch size]
        embedded = self.dropout(self.embedding(src))
        outputs, (hidden, cell) = self.rnn(embedded)
        return hidden, cell


class Decoder(nn.Module):
    def __init__(self, output_dim, emb_dim, hid_dim, n_layers, dropout):
        super().__init__()
        self.output_dim = output_dim
        self.hid_dim = hid_dim
        self.n_layers = n_layers
        self.embedding = nn.Embedding(output_dim, emb_dim)
        self.rnn = nn.LSTM(emb_dim, hid_dim, n_layers, dropout=dropout)
        self.fc_out = nn.Linear(hid_dim, output_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, cell):
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        output, (hidden, cell) = self.rnn(embedded, (hidden, cell))
        prediction = self.fc_out(output.squeeze(0))
        return prediction, hidden, cell


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.device = device
        assert encoder.hid_dim == decoder.hid_dim, "Hidden dimensions of encoder and decoder must be equal!"
        assert encoder.n_layers == decoder.n_layers, "Encoder and decoder must have equal number of layers!"

    def forward(self, src, trg, teacher_forcing_ratio=0.5):
        # teacher_forcing_ratio is probability to use teacher forcing
        batch_size = trg.shape[1]
        trg_len = trg.shape[0]
        trg_vocab_size = self.decoder.output_dim
        # tensor to store decoder outputs
        outputs = torch.zeros(trg_len, batch_size, trg_vocab_size).to(self.device)
        hidden, cell = self.encoder(src)
        # first input to the decoder is the <sos> tokens
        input = trg[0, :]
        for t in range(1, trg_len):
            output, hidden, cell = self.decoder(input, hidden, cell)
            outputs[t] = output
            teacher_force = random.random() < teacher_forcing_ratio
            top1 = output.argmax(1)
            input = trg[t] if teacher_force else top1
        return outputs


INPUT_DIM, OUTPUT_DIM = 40, 40
ENC_EMB_DIM = DEC_EMB_DIM = 32
HID_DIM, N_LAYERS = 64, 2
ENC_DROPOUT = DEC_DROPOUT = 0.3
SOS, EOS, PAD = 1, 2, 0

enc = Encoder(INPUT_DIM, ENC_EMB_DIM, HID_DIM, N_LAYERS, ENC_DROPOUT)
dec = Decoder(OUTPUT_DIM, DEC_EMB_DIM, HID_DIM, N_LAYERS, DEC_DROPOUT)
model = Seq2Seq(enc, dec, device).to(device)


def init_weights(m):
    for _name, param in m.named_parameters():
        nn.init.uniform_(param.data, -0.08, 0.08)


model.apply(init_weights)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


print(f'The model has {count_parameters(model):,} trainable parameters')

optimizer = optim.Adam(model.parameters())
TRG_PAD_IDX = PAD
criterion = nn.CrossEntropyLoss(ignore_index=TRG_PAD_IDX)


class Batch:
    def __init__(self, src, trg):
        self.src, self.trg = src, trg


def make_iterator(n_batches, batch_size, generator):
    """A reversal task in BucketIterator's [len, batch] layout: trg = <sos> reversed(src) <eos>."""
    batches = []
    for _ in range(n_batches):
        body = torch.randint(3, INPUT_DIM, (10, batch_size), generator=generator)
        src = torch.cat([torch.full((1, batch_size), SOS), body, torch.full((1, batch_size), EOS)])
        trg = torch.cat([torch.full((1, batch_size), SOS), body.flip(0), torch.full((1, batch_size), EOS)])
        batches.append(Batch(src.to(device), trg.to(device)))
    return batches


data_gen = torch.Generator().manual_seed(0)
train_iterator = make_iterator(40, 32, data_gen)
valid_iterator = make_iterator(5, 32, data_gen)
test_iterator = make_iterator(5, 32, data_gen)


def train(model, iterator, optimizer, criterion, clip):
    model.train()
    epoch_loss = 0
    for _i, batch in enumerate(iterator):
        src = batch.src
        trg = batch.trg
        optimizer.zero_grad()
        output = model(src, trg)
        # trg = [trg len, batch size], output = [trg len, batch size, output dim]
        output_dim = output.shape[-1]
        output = output[1:].view(-1, output_dim)
        trg = trg[1:].view(-1)
        loss = criterion(output, trg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        epoch_loss += loss.item()
    return epoch_loss / len(iterator)


def evaluate(model, iterator, criterion):
    model.eval()
    epoch_loss = 0
    with torch.no_grad():
        for _i, batch in enumerate(iterator):
            src = batch.src
            trg = batch.trg
            output = model(src, trg, 0)  # turn off teacher forcing
            output_dim = output.shape[-1]
            output = output[1:].view(-1, output_dim)
            trg = trg[1:].view(-1)
            loss = criterion(output, trg)
            epoch_loss += loss.item()
    return epoch_loss / len(iterator)


def epoch_time(start_time, end_time):
    elapsed_time = end_time - start_time
    elapsed_mins = int(elapsed_time / 60)
    elapsed_secs = int(elapsed_time - (elapsed_mins * 60))
    return elapsed_mins, elapsed_secs


N_EPOCHS = 5
CLIP = 1

best_valid_loss = float('inf')
best_state = None
for epoch in range(N_EPOCHS):
    start_time = time.time()
    train_loss = train(model, train_iterator, optimizer, criterion, CLIP)
    valid_loss = evaluate(model, valid_iterator, criterion)
    end_time = time.time()
    epoch_mins, epoch_secs = epoch_time(start_time, end_time)
    if valid_loss < best_valid_loss:
        best_valid_loss = valid_loss
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        best_state = buffer.getvalue()
    print(f'Epoch: {epoch + 1:02}')
    print(f'\tTrain Loss: {train_loss:.4f} | Train PPL: {math.exp(train_loss):7.3f}')
    print(f'\t Val. Loss: {valid_loss:.4f} |  Val. PPL: {math.exp(valid_loss):7.3f}')

model.load_state_dict(torch.load(io.BytesIO(best_state)))
test_loss = evaluate(model, test_iterator, criterion)
print(f'| Test Loss: {test_loss:.4f} | Test PPL: {math.exp(test_loss):7.3f} |')
print(f"checksum {sum(p.double().sum() for p in model.parameters()).item():.4f} random state {random.random():.6f}")
