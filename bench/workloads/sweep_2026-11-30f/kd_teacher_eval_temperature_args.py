# knowledge distillation: teacher in eval() under torch.no_grad(), temperature and alpha from argparse args
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--temperature", type=float, default=4.0)
parser.add_argument("--alpha", type=float, default=0.9)
parser.add_argument("--epochs", type=int, default=5)
args = parser.parse_args()

torch.manual_seed(0)
device = "cuda"

train_x = torch.randn(40, 64, 32, device=device)
train_y = (train_x[..., :8].sum(-1) * 2).long().clamp(-4, 5) + 4

teacher = nn.Sequential(
    nn.Linear(32, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.3),
    nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10),
).to(device)
student = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 10)).to(device)
optimizer = torch.optim.Adam(student.parameters(), lr=1e-3)


def distillation_loss(student_logits, teacher_logits, labels, T, alpha):
    soft = F.kl_div(F.log_softmax(student_logits / T, dim=1), F.softmax(teacher_logits / T, dim=1),
                    reduction="batchmean") * (T * T)
    hard = F.cross_entropy(student_logits, labels)
    return alpha * soft + (1.0 - alpha) * hard


teacher.eval()
for epoch in range(args.epochs):
    student.train()
    running = 0.0
    for x, y in zip(train_x, train_y):
        with torch.no_grad():
            teacher_logits = teacher(x)
        student_logits = student(x)
        loss = distillation_loss(student_logits, teacher_logits, y, args.temperature, args.alpha)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += loss.item()
    print(f"epoch {epoch} kd loss {running / len(train_x):.4f}")

student.eval()
with torch.no_grad():
    agree = (student(train_x[0]).argmax(1) == teacher(train_x[0]).argmax(1)).float().mean().item()
print(f"final loss {loss.item():.4f} agreement {agree:.4f}")
print("checksum", round(sum(p.double().sum() for p in student.parameters()).item(), 4))
print("teacher checksum", round(sum(p.double().sum() for p in teacher.parameters()).item(), 4))
