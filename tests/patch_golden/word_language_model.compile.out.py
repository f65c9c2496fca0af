"""The PyTorch examples' word_language_model main.py over several epochs: batchify(), get_batch()
with seq_len = min(bptt, len(source) - 1 - i) so each epoch's last batch is shorter, an LSTM LM
with init_hidden()/repackage_hidden(), zero_grad, clipping, the update by hand (no optimizer), an
evaluate() under no_grad per epoch, and lr /= 4.0 when the validation loss did not improve."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
ntokens, emsize, nhid, bptt, batch_size, eval_batch_size, clip = 200, 32, 64, 20, 20, 10, 0.25
epochs, lr, steps = 5, 20.0, int(os.environ.get("CG_STEPS", "200"))


def batchify(data, bsz):
    data = data.narrow(0, 0, data.size(0) // bsz * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers=2, dropout=0.2):
        super().__init__()
        self.drop, self.encoder = nn.Dropout(dropout), nn.Embedding(ntoken, ninp)
        self.rnn, self.decoder = nn.LSTM(ninp, nhid, nlayers, dropout=dropout), nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
        return torch.log_softmax(self.decoder(self.drop(output)).view(-1, self.decoder.out_features), dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return tuple(weight.new_zeros(self.rnn.num_layers, bsz, self.rnn.hidden_size) for _ in range(2))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


nbatch = max(1, steps // epochs)  # bptt-long batches per epoch, the last one 10 tokens long
train_data = batchify(torch.randint(0, ntokens, (((nbatch - 1) * bptt + 11) * batch_size,)), batch_size)
val_data = batchify(torch.randint(0, ntokens, (4000,)), eval_batch_size)
model, criterion = RNNModel(ntokens, emsize, nhid).to(device), nn.NLLLoss()


def evaluate(data_source):
    model.eval()
    total_loss, hidden = 0.0, model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    model.train()
    hidden = model.init_hidden(batch_size)
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = _cg_compiled_model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    return loss


best_val_loss = None
for epoch in range(1, epochs + 1):
    loss = train()
    val_loss = evaluate(val_data)
    print(f"| end of epoch {epoch:3d} | lr {lr:.2f} | valid loss {val_loss:5.2f}")
    if not best_val_loss or val_loss < best_val_loss:
        best_val_loss = val_loss
    else:
        lr /= 4.0
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
