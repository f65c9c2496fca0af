# Hugging Face examples/pytorch/text-classification/run_glue_no_trainer.py in plain torch: a ModelOutput dataclass, dict batches padded per batch (DataCollatorWithPadding, pad_to_multiple_of=8), outputs = model(**batch), outputs.loss, gradient_accumulation_steps, get_linear_schedule_with_warmup as LambdaLR, completed_steps, total_loss += loss.detach().float(), eval with metric.add_batch
import argparse
import math
from collections import OrderedDict
from dataclasses import dataclass, fields
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader


# ---- transformers.utils.ModelOutput, trimmed ----
class ModelOutput(OrderedDict):
    def __post_init__(self):
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclass
class SequenceClassifierOutput(ModelOutput):
    loss: Optional[torch.FloatTensor] = None
    logits: torch.FloatTensor = None


# ---- a tiny BERT-like sequence classifier ----
class Config:
    vocab_size, hidden_size, num_attention_heads, num_hidden_layers, intermediate_size = 300, 64, 4, 2, 128
    max_position_embeddings, hidden_dropout_prob, num_labels, pad_token_id = 64, 0.1, 2, 0


class Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.heads = config.num_attention_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)
        self.norm1 = nn.LayerNorm(config.hidden_size)
        self.ffn = nn.Sequential(nn.Linear(config.hidden_size, config.intermediate_size), nn.GELU(),
                                 nn.Linear(config.intermediate_size, config.hidden_size))
        self.norm2 = nn.LayerNorm(config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden, extended_mask):
        b, t, d = hidden.shape
        q, k, v = self.qkv(hidden).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads) + extended_mask
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        hidden = self.norm1(hidden + self.dropout(self.out(context)))
        return self.norm2(hidden + self.dropout(self.ffn(hidden)))


class BertForSequenceClassification(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_labels = config.num_labels
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(2, config.hidden_size)
        self.emb_norm = nn.LayerNorm(config.hidden_size)
        self.layers = nn.ModuleList([Layer(config) for _ in range(config.num_hidden_layers)])
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, return_dict=None):
        b, t = input_ids.shape
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        positions = torch.arange(t, device=input_ids.device).unsqueeze(0)
        hidden = self.word_embeddings(input_ids) + self.position_embeddings(positions) + \
            self.token_type_embeddings(token_type_ids)
        hidden = self.dropout(self.emb_norm(hidden))
        extended_mask = (1.0 - attention_mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
        for layer in self.layers:
            hidden = layer(hidden, extended_mask)
        pooled = torch.tanh(self.pooler(hidden[:, 0]))
        logits = self.classifier(self.dropout(pooled))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        return SequenceClassifierOutput(loss=loss, logits=logits)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps, last_epoch=-1):
    def lr_lambda(current_step: int):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    return LambdaLR(optimizer, lr_lambda, last_epoch)


def make_dataset(n, generator):
    """GLUE-like tokenized pairs: [CLS] a [SEP] b [SEP], label = whether a token of a reappears in b."""
    examples = []
    for _ in range(n):
        la, lb = torch.randint(3, 12, (2,), generator=generator).tolist()
        a = torch.randint(5, 300, (la,), generator=generator)
        b = torch.randint(5, 300, (lb,), generator=generator)
        if torch.rand(1, generator=generator).item() < 0.5:
            b[torch.randint(0, lb, (1,), generator=generator)] = a[torch.randint(0, la, (1,), generator=generator)]
        label = int(bool((a[:, None] == b[None, :]).any()))
        ids = [1] + a.tolist() + [2] + b.tolist() + [2]
        types = [0] * (la + 2) + [1] * (lb + 1)
        examples.append({"input_ids": ids, "token_type_ids": types, "attention_mask": [1] * len(ids), "labels": label})
    return examples


class DataCollatorWithPadding:
    def __init__(self, pad_to_multiple_of=None):
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features):
        longest = max(len(f["input_ids"]) for f in features)
        if self.pad_to_multiple_of:
            longest = (longest + self.pad_to_multiple_of - 1) // self.pad_to_multiple_of * self.pad_to_multiple_of
        batch = {key: torch.tensor([f[key] + [0] * (longest - len(f[key])) for f in features])
                 for key in ("input_ids", "token_type_ids", "attention_mask")}
        batch["labels"] = torch.tensor([f["labels"] for f in features])
        return batch


class Accuracy:
    def __init__(self):
        self.predictions, self.references = [], []

    def add_batch(self, predictions, references):
        self.predictions.append(predictions.cpu())
        self.references.append(references.cpu())

    def compute(self):
        p, r = torch.cat(self.predictions), torch.cat(self.references)
        self.predictions, self.references = [], []
        return {"accuracy": (p == r).float().mean().item()}


def main():
    parser = argparse.ArgumentParser(description="Finetune a transformers model on a text classification task")
    parser.add_argument("--per_device_train_batch_size", type=int, default=8)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--num_train_epochs", type=int, default=3)
    parser.add_argument("--max_train_steps", type=int, default=None)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=2)
    parser.add_argument("--num_warmup_steps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--with_tracking", action="store_false", default=True)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = "cuda"
    generator = torch.Generator().manual_seed(0)
    train_dataset = make_dataset(512, generator)
    eval_dataset = make_dataset(128, generator)

    model = BertForSequenceClassification(Config()).to(device)

    data_collator = DataCollatorWithPadding(pad_to_multiple_of=8)
    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=data_collator,
                                  batch_size=args.per_device_train_batch_size)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=data_collator, batch_size=args.per_device_eval_batch_size)

    no_decay = ["bias", "LayerNorm.weight", "norm1.weight", "norm2.weight", "emb_norm.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate)

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch

    lr_scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=args.num_warmup_steps,
                                                   num_training_steps=args.max_train_steps)
    metric = Accuracy()

    print("***** Running training *****")
    print(f"  Num examples = {len(train_dataset)}")
    print(f"  Total optimization steps = {args.max_train_steps}")
    completed_steps = 0
    starting_epoch = 0
    for epoch in range(starting_epoch, args.num_train_epochs):
        model.train()
        if args.with_tracking:
            total_loss = 0
        for step, batch in enumerate(train_dataloader):
            batch = {k: v.to(device) for k, v in batch.items()}
            outputs = model(**batch)
            loss = outputs.loss
            # We keep track of the loss at each epoch
            if args.with_tracking:
                total_loss += loss.detach().float()
            loss = loss / args.gradient_accumulation_steps
            loss.backward()
            if step % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
                completed_steps += 1

            if completed_steps >= args.max_train_steps:
                break

        model.eval()
        for _step, batch in enumerate(eval_dataloader):
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            metric.add_batch(predictions=predictions, references=batch["labels"])

        eval_metric = metric.compute()
        print(f"epoch {epoch}: {eval_metric['accuracy']:.4f} train_loss {total_loss.item() / len(train_dataloader):.4f} "
              f"step {completed_steps}")

    checksum = sum(p.double().sum() for p in model.parameters()).item()
    print(f"final completed_steps {completed_steps} eval accuracy {eval_metric['accuracy']:.4f} "
          f"last loss {loss.item() * args.gradient_accumulation_steps:.4f} lr {lr_scheduler.get_last_lr()[0]:.6e} "
          f"checksum {checksum:.4f}")


if __name__ == "__main__":
    main()
