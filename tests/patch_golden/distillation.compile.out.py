"""The PyTorch knowledge-distillation tutorial's loop: a trained teacher run under no_grad on
each batch, a smaller student trained on a mix of the soft targets (KL divergence at a
temperature) and the true labels; Adam, cross-entropy."""
import os

import torch
import torch.nn.functional as F
from torch import nn, optim

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
teacher = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(device)
student = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
teacher.eval()
optimizer = optim.Adam(student.parameters(), lr=1e-3)
ce_loss = nn.CrossEntropyLoss()
T, soft_target_loss_weight, ce_loss_weight = 2.0, 0.25, 0.75
train_loader = [(torch.randn(64, 128), torch.randint(0, 10, (64,))) for _ in range(16)]

student.train()
_cg_compiled_student = torch.compile(student, mode="reduce-overhead")  # cg-advise: scope compile

for step in range(steps):
    torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
    inputs, labels = train_loader[step % len(train_loader)]
    inputs, labels = inputs.to(device), labels.to(device)
    optimizer.zero_grad()
    with torch.no_grad():
        teacher_logits = teacher(inputs)
    student_logits = _cg_compiled_student(inputs)
    soft_targets = F.softmax(teacher_logits / T, dim=-1)
    soft_prob = F.log_softmax(student_logits / T, dim=-1)
    soft_targets_loss = torch.sum(soft_targets * (soft_targets.log() - soft_prob)) / soft_prob.size()[0] * (T ** 2)
    label_loss = ce_loss(student_logits, labels)
    loss = soft_target_loss_weight * soft_targets_loss + ce_loss_weight * label_loss
    loss.backward()
    optimizer.step()
    if step % 50 == 49:
        print(f"step {step + 1} loss {loss.item():.5f}")
print(f"final {loss.item():.6f}")
