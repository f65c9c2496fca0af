import torch
from transformers import BertConfig, BertForSequenceClassification


def main():
    config = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(config).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    batch = {"input_ids": torch.randint(0, 1000, (8, 32), device="cuda"),
             "labels": torch.randint(0, 2, (8,), device="cuda")}
    model.train()
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for _ in range(200):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        outputs = _cg_compiled_model(**batch)
        outputs.loss.backward()
        optimizer.step()
        optimizer.zero_grad()


main()
