# knowledge distillation with a CRD-style DistillKL loss module whose set_epoch() anneals its temperature (like sampler.set_epoch)
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class DistillKL(nn.Module):
    def __init__(self, temperatures, alpha=0.7):
        super().__init__()
        self.temperatures, self.alpha = temperatures, alpha
        self.T = temperatures[0]

    def set_epoch(self, epoch):
        self.T = self.temperatures[min(epoch, len(self.temperatures) - 1)]

    def forward(self, y_s, y_t, labels):
        p_s = F.log_softmax(y_s / self.T, dim=1)
        p_t = F.softmax(y_t / self.T, dim=1)
        soft = F.kl_div(p_s, p_t, reduction="batchmean") * self.T ** 2
        return self.alpha * soft + (1 - self.alpha) * F.cross_entropy(y_s, labels)


teacher = nn.Sequential(nn.Linear(40, 256), nn.ReLU(), nn.Linear(256, 10)).to(device).eval()
student = nn.Sequential(nn.Linear(40, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
criterion = DistillKL([8.0, 4.0, 2.0, 1.0])
optimizer = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
xs = torch.randn(20, 64, 40, device=device)
with torch.no_grad():
    ys = teacher(xs).argmax(-1)

for epoch in range(4):
    criterion.set_epoch(epoch)
    student.train()
    for x, y in zip(xs, ys):
        with torch.no_grad():
            t_logits = teacher(x)
        loss = criterion(student(x), t_logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} T {criterion.T} loss {loss.item():.5f}")
with torch.no_grad():
    agree = (student(xs.flatten(0, 1)).argmax(-1) == ys.flatten()).float().mean().item()
print("agreement", round(agree, 4), "param sum", round(sum(p.sum().item() for p in student.parameters()), 5))
