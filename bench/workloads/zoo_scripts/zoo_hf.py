"""A Hugging Face model (bench/zoo.py's HF_ZOO, built from a config) trained the way the
Trainer does it, in a function: dict batches in pinned host memory moved to the GPU each
step, the loss from the model's output, gradient clipping, AdamW and, for some, a linear
warm-up schedule."""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from zoo import HF_ZOO  # noqa: E402

VOCAB = 1000


def build(spec):
    import transformers

    if spec["arch"] == "bert":
        config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=spec["hidden"],
                                         num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
                                         intermediate_size=4 * spec["hidden"], max_position_embeddings=512,
                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        return transformers.BertForSequenceClassification(config)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=spec["hidden"], n_layer=spec["layers"],
                                     n_head=spec["heads"], n_positions=spec["seq"], resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def batches(spec, count=8):
    generator = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        ids = torch.randint(0, VOCAB, (spec["batch"], spec["seq"]), generator=generator)
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        batch["labels"] = (torch.randint(0, 2, (spec["batch"],), generator=generator) if spec["arch"] == "bert"
                           else ids.clone())
        out.append({key: value.pin_memory() for key, value in batch.items()})
    return out


def train(args):
    spec = HF_ZOO[args.workload]
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = build(spec).cuda()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    scheduler = None
    if spec["scheduler"]:
        warmup = 20
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / warmup) * max(0.0, 1 - step / (10 * args.steps)))
    data = batches(spec)
    for step in range(args.steps):
        batch = {key: value.to("cuda", non_blocking=True) for key, value in data[step % len(data)].items()}
        outputs = model(**batch)
        loss = outputs.loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()
    print(f"final loss {loss.item():.6f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=sorted(HF_ZOO))
    parser.add_argument("--steps", type=int, default=200)
    train(parser.parse_args())
