"""minGPT's Trainer: the step lives in a method, the batch comes from an iterator restarted on
StopIteration, and the loss is stored on the trainer (self.loss) for callbacks to read."""
import os

import torch
from torch import nn


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, width=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.block = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.head = nn.Linear(width, vocab)

    def forward(self, idx, targets=None):
        x = self.embed(idx)
        x = x + self.block(x)
        logits = self.head(x)
        loss = None
        if targets is not None:
            loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


class Trainer:
    def __init__(self, model, data, max_iters, device):
        self.model, self.data, self.max_iters, self.device = model, data, max_iters, device
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, betas=(0.9, 0.95))
        self.iter_num = 0
        self.callbacks = []

    def run(self):
        model = self.model
        model.train()
        data_iter = iter(self.data)
        _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

        while True:
            torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
            try:
                batch = next(data_iter)
            except StopIteration:
                data_iter = iter(self.data)
                batch = next(data_iter)
            batch = [t.to(self.device) for t in batch]
            x, y = batch
            logits, self.loss = _cg_compiled_model(x, y)
            model.zero_grad(set_to_none=True)
            self.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            self.optimizer.step()
            for callback in self.callbacks:
                callback(self)
            self.iter_num += 1
            if self.iter_num >= self.max_iters:
                break


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = [(torch.randint(0, 64, (16, 32)), torch.randint(0, 64, (16, 32))) for _ in range(25)]
    trainer = Trainer(TinyGPT().to(device), data, int(os.environ.get("CG_STEPS", "200")), device)
    trainer.callbacks.append(lambda t: t.iter_num % 50 == 0 and print(f"iter {t.iter_num} loss {t.loss.item():.5f}"))
    trainer.run()
    print(f"final loss {trainer.loss.item():.6f}")
