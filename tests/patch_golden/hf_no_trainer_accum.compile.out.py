"""Hugging Face's examples/pytorch/text-classification/run_glue_no_trainer.py, without accelerate:
a model whose forward(input_ids, attention_mask, labels) returns an output object with .loss and
.logits (a small dataclass, as a SequenceClassifierOutput); AdamW over two param groups (no
weight decay for bias and LayerNorm.weight); a LambdaLR linear warmup then decay (as
get_linear_schedule_with_warmup); batches are dicts from a collate function; the epoch loop
`for step, batch in enumerate(train_dataloader)`: outputs = model(**batch), total_loss +=
loss.detach().float(), loss / gradient_accumulation_steps, backward, and an update only
`if step % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1` (step, the
scheduler's step, zero_grad, completed_steps += 1), `break` once completed_steps reaches
max_train_steps; an eval loop under torch.no_grad() computing accuracy after each epoch."""
import math
import os
from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from torch.utils.data import DataLoader

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
vocab, max_length, num_labels = 100, 16, 2
per_device_train_batch_size, gradient_accumulation_steps, weight_decay, learning_rate = 8, 4, 0.01, 5e-4
max_train_steps = max(1, steps // gradient_accumulation_steps)


@dataclass
class SequenceClassifierOutput:
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None


class TinyForSequenceClassification(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.LayerNorm = nn.LayerNorm(hidden)
        self.dense, self.classifier = nn.Linear(hidden, hidden), nn.Linear(hidden, num_labels)

    def forward(self, input_ids, attention_mask, labels=None):
        h = self.LayerNorm(self.embeddings(input_ids))
        mask = attention_mask.unsqueeze(-1).float()
        pooled = torch.tanh(self.dense((h * mask).sum(1) / mask.sum(1)))
        logits = self.classifier(pooled)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def make_features(n):
    features = []
    for _ in range(n):
        length = int(torch.randint(4, max_length + 1, (1,)))
        ids = torch.zeros(max_length, dtype=torch.long, device=device)
        ids[:length] = torch.randint(1, vocab, (length,), device=device)
        mask = (torch.arange(max_length, device=device) < length).long()
        features.append({"input_ids": ids, "attention_mask": mask, "labels": (ids[0] < vocab // 2).long()})
    return features


def data_collator(features):
    return {k: torch.stack([f[k] for f in features]) for k in features[0]}


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


train_dataloader = DataLoader(make_features(16 * 8), shuffle=True, collate_fn=data_collator,
                              batch_size=per_device_train_batch_size, generator=torch.Generator().manual_seed(0))
eval_dataloader = DataLoader(make_features(4 * 8), collate_fn=data_collator, batch_size=8)
model = TinyForSequenceClassification().to(device)
no_decay = ["bias", "LayerNorm.weight"]
optimizer_grouped_parameters = [
    {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)], "weight_decay": weight_decay},
    {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
]
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=learning_rate)
num_update_steps_per_epoch = math.ceil(len(train_dataloader) / gradient_accumulation_steps)
num_train_epochs = math.ceil(max_train_steps / num_update_steps_per_epoch)
lr_scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=max_train_steps // 10,
                                               num_training_steps=max_train_steps)
completed_steps, starting_epoch = 0, 0
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile
for _cg_p in (model.parameters() if isinstance(model, torch.nn.Module) else ()):  # cg-advise: gradients add up over backward calls: each is copied out of compile's CUDA graph memory
    if _cg_p.requires_grad:
        _cg_p.register_hook(torch.clone)

for epoch in range(starting_epoch, num_train_epochs):
    model.train()
    total_loss = 0
    for step, batch in enumerate(train_dataloader):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        outputs = _cg_compiled_model(**batch)
        loss = outputs.loss
        total_loss += loss.detach().float()
        loss = loss / gradient_accumulation_steps
        loss.backward()
        if step % gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()
            completed_steps += 1
        if completed_steps >= max_train_steps:
            break
    model.eval()
    correct, samples_seen = 0, 0
    for batch in eval_dataloader:
        with torch.no_grad():
            outputs = model(**batch)
        predictions = outputs.logits.argmax(dim=-1)
        correct += (predictions == batch["labels"]).sum().item()
        samples_seen += batch["labels"].numel()
    print(f"epoch {epoch}: accuracy {correct / samples_seen:.4f} train_loss {total_loss.item() / len(train_dataloader):.4f}")
print(f"final loss {loss.item() * gradient_accumulation_steps:.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
