"""A knowledge-distillation loop in the shape of haitongli/knowledge-distillation-pytorch: a frozen CNN teacher in eval mode run under torch.no_grad(), a small CNN student, loss = alpha * KLDivLoss(log_softmax(s/T), softmax(t/T)) * T*T + (1 - alpha) * cross-entropy, SGD with momentum, batches from a shuffled DataLoader over a TensorDataset moved with .to(device, non_blocking=True)."""
import math
import os

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def cnn(c1, c2, hidden):
    return nn.Sequential(
        nn.Conv2d(1, c1, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(c2 * 7 * 7, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def loss_fn_kd(outputs, labels, teacher_outputs, alpha=0.9, T=4.0):
    soft = nn.KLDivLoss(reduction="batchmean")(F.log_softmax(outputs / T, dim=1), F.softmax(teacher_outputs / T, dim=1))
    return soft * (alpha * T * T) + F.cross_entropy(outputs, labels) * (1.0 - alpha)


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
dataset = TensorDataset(torch.randn(1024, 1, 28, 28), torch.randint(0, 10, (1024,)))
train_loader = DataLoader(dataset, batch_size=64, shuffle=True, drop_last=True, pin_memory=device == "cuda")
epochs = math.ceil(steps / len(train_loader))

teacher = cnn(32, 64, 256).to(device)
teacher.eval()
for p in teacher.parameters():
    p.requires_grad_(False)
student = cnn(8, 16, 64).to(device)
optimizer = torch.optim.SGD(student.parameters(), lr=0.01, momentum=0.9)

step = 0
for epoch in range(epochs):
    student.train()
    for i, (train_batch, labels_batch) in enumerate(train_loader):
        train_batch, labels_batch = train_batch.to(device, non_blocking=True), labels_batch.to(device, non_blocking=True)
        output_batch = student(train_batch)
        with torch.no_grad():
            output_teacher_batch = teacher(train_batch)
        loss = loss_fn_kd(output_batch, labels_batch, output_teacher_batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if i % 10 == 0:
            print(f"epoch {epoch} batch {i} loss {loss.item():.4f}")
        if step == steps:
            break

print(f"final loss {loss.item():.6f}")
