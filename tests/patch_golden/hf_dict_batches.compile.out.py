import torch
from transformers import BertConfig, BertForSequenceClassification

config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=256, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
model = BertForSequenceClassification(config).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
dataset = [{"input_ids": torch.randint(0, 1000, (8, 32)), "attention_mask": torch.ones(8, 32, dtype=torch.long),
            "labels": torch.randint(0, 2, (8,))} for _ in range(200)]

model.train()
_cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

for batch in dataset:
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    batch = {k: v.to("cuda", non_blocking=True) for k, v in batch.items()}
    outputs = _cg_compiled_model(**batch)
    loss = outputs.loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
