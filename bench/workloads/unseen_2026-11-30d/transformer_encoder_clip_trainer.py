"""An HF-style custom trainer written in plain torch for a small nn.TransformerEncoder sequence
classifier: AdamW, clip_grad_norm_ in training_step, a step-limited train() loop over epochs."""
import math
import os

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class EncoderClassifier(nn.Module):
    def __init__(self, vocab_size=2000, d_model=192, n_heads=4, n_layers=3, max_len=128, n_labels=6):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model, dropout=0.1,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_labels)
        nn.init.normal_(self.pos, std=0.02)

    def forward(self, input_ids):
        h = self.tok(input_ids) * math.sqrt(self.tok.embedding_dim) + self.pos[:, : input_ids.size(1)]
        h = self.encoder(h)
        return self.head(self.norm(h.mean(dim=1)))


class Trainer:
    def __init__(self, model, train_dataset, max_grad_norm=1.0, lr=3e-4, weight_decay=0.01, logging_steps=100):
        self.model = model
        self.train_dataset = train_dataset
        self.max_grad_norm = max_grad_norm
        self.logging_steps = logging_steps
        self.criterion = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)

    def training_step(self, inputs):
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(inputs["input_ids"])
        loss = self.criterion(logits, inputs["labels"])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return loss.detach()

    def train(self, max_steps):
        self.model.train()
        global_step = 0
        tr_loss = torch.zeros((), device=device)
        logged_loss = 0.0
        epoch = 0
        while global_step < max_steps:
            for inputs in self.train_dataset:
                tr_loss += self.training_step(inputs)
                global_step += 1
                if global_step % self.logging_steps == 0:
                    total = tr_loss.item()
                    print(f"{{'epoch': {epoch}, 'step': {global_step}, "
                          f"'loss': {(total - logged_loss) / self.logging_steps:.4f}}}")
                    logged_loss = total
                if global_step >= max_steps:
                    break
            epoch += 1
        return global_step, tr_loss.item() / max(global_step, 1)


def make_dataset(n_batches=32, batch_size=32, seq_len=96, vocab_size=2000, n_labels=6):
    batches = []
    for _ in range(n_batches):
        labels = torch.randint(0, n_labels, (batch_size,), device=device)
        ids = torch.randint(n_labels, vocab_size, (batch_size, seq_len), device=device)
        ids[:, :4] = labels[:, None]  # the label's token leads each sequence
        batches.append({"input_ids": ids, "labels": labels})
    return batches


def main():
    torch.manual_seed(0)
    steps = int(os.environ.get("CG_STEPS", "600"))
    model = EncoderClassifier().to(device)
    trainer = Trainer(model, make_dataset())
    global_step, mean_loss = trainer.train(max_steps=steps)
    print(f"TrainOutput(global_step={global_step}, training_loss={mean_loss:.4f})")
    print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))


if __name__ == "__main__":
    main()
