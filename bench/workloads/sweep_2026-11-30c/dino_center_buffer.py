# facebookresearch/dino main_dino.py shape: DINOLoss module whose forward re-binds its `center` buffer (EMA of teacher outputs)
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class DINOLoss(nn.Module):
    def __init__(self, out_dim, teacher_temp=0.04, student_temp=0.1, center_momentum=0.9):
        super().__init__()
        self.student_temp = student_temp
        self.teacher_temp = teacher_temp
        self.center_momentum = center_momentum
        self.register_buffer("center", torch.zeros(1, out_dim))

    def forward(self, student_output, teacher_output):
        student_out = student_output / self.student_temp
        teacher_out = F.softmax((teacher_output - self.center) / self.teacher_temp, dim=-1).detach()
        loss = torch.sum(-teacher_out * F.log_softmax(student_out, dim=-1), dim=-1).mean()
        self.update_center(teacher_output)
        return loss

    @torch.no_grad()
    def update_center(self, teacher_output):
        batch_center = torch.sum(teacher_output, dim=0, keepdim=True) / len(teacher_output)
        self.center = self.center * self.center_momentum + batch_center * (1 - self.center_momentum)


def head():
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16))


student = head().to(device)
teacher = copy.deepcopy(student)
for p in teacher.parameters():
    p.requires_grad = False
dino_loss = DINOLoss(16).to(device)
optimizer = torch.optim.SGD(student.parameters(), lr=0.03, momentum=0.9)
images = torch.randn(24, 32, 32, device=device)
momentum_teacher = 0.99

for epoch in range(3):
    for _it, x in enumerate(images):
        view1 = x + 0.1 * torch.randn_like(x)
        view2 = x.flip(0) * 0.9
        teacher_output = teacher(view2)
        student_output = student(view1)
        loss = dino_loss(student_output, teacher_output)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for param_q, param_k in zip(student.parameters(), teacher.parameters()):
                param_k.data.mul_(momentum_teacher).add_((1 - momentum_teacher) * param_q.detach().data)
    print(f"epoch {epoch} loss {loss.item():.5f}")
print("center sum", round(dino_loss.center.sum().item(), 5), "center norm", round(dino_loss.center.norm().item(), 5))
print("teacher sum", round(sum(p.sum().item() for p in teacher.parameters()), 5))
