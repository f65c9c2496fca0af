import os

import torch
from torch import nn


class Output(dict):
    """Like a Hugging Face ModelOutput: a dict whose items are also attributes."""

    __getattr__ = dict.__getitem__


class TinyLM(nn.Module):
    def __init__(self, vocab=100, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, input_ids, labels=None):
        logits = self.head(torch.tanh(self.embed(input_ids)))
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()) if labels is not None else None
        return Output(loss=loss, logits=logits)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
model = TinyLM().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
batches = [torch.randint(0, 100, (4, 16)) for _ in range(8)]

model.train()
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    ids = batches[step % len(batches)].to(device)
    out = _cg_compiled_model(input_ids=ids, labels=ids)
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()

print(f"final loss {out.loss.item():.6f}")
print("logits", tuple(out.logits.shape), round(out.logits.float().mean().item(), 6))
