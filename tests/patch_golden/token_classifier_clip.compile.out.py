"""A token-classification (NER-style) fine-tuning loop as in the Hugging Face examples written
by hand: an embedding and a 2-layer TransformerEncoder with a tag head, CrossEntropyLoss with
ignore_index=-100 on padded/sub-word positions, AdamW, clip_grad_norm_ every step and
get_linear_schedule_with_warmup as a LambdaLR stepped every batch; loss read every 50 steps."""
import os

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab, dim, num_tags, seq_len, batch_size = 5000, 128, 9, 48, 32


class TokenClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(1, seq_len, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.classifier = nn.Linear(dim, num_tags)

    def forward(self, input_ids):
        return self.classifier(self.encoder(self.embed(input_ids) + self.position))


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


model = TokenClassifier().to(device)
criterion = nn.CrossEntropyLoss(ignore_index=-100)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=20, num_training_steps=steps)

input_ids = torch.randint(0, vocab, (steps, batch_size, seq_len))
labels = torch.randint(0, num_tags, (steps, batch_size, seq_len))
labels[torch.rand(steps, batch_size, seq_len) < 0.25] = -100

model.train()
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    ids, tags = input_ids[step].to(device), labels[step].to(device)
    logits = _cg_compiled_model(ids)
    loss = criterion(logits.view(-1, num_tags), tags.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    if step % 50 == 0:
        print(f"step {step} lr {scheduler.get_last_lr()[0]:.6f} loss {loss.item():.6f}")

checksum = sum(p.double().sum().item() for p in model.parameters())
print(f"final loss {loss.item():.6f} checksum {checksum:.6f}")
