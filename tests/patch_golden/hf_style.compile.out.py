import torch
from transformers import AutoModelForSequenceClassification


def main():
    model = AutoModelForSequenceClassification.from_pretrained("prajjwal1/bert-tiny").cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    batch = {"input_ids": torch.randint(0, 1000, (8, 32), device="cuda"),
             "labels": torch.randint(0, 2, (8,), device="cuda")}
    model.train()
    model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for _ in range(10):
        outputs = model(**batch)
        outputs.loss.backward()
        optimizer.step()
        optimizer.zero_grad()


main()
