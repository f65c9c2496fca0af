# fast.ai course (part 2) hand-written Learner: callbacks found by event name; a callback anneals the model's dropout p each epoch
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class Callback:
    learn = None


class DropoutAnneal(Callback):
    def __init__(self, start, end):
        self.start, self.end = start, end

    def before_epoch(self):
        frac = self.learn.epoch / max(1, self.learn.n_epochs - 1)
        self.learn.model.drop.p = self.start + (self.end - self.start) * frac


class Recorder(Callback):
    def __init__(self):
        self.losses = []

    def after_epoch(self):
        self.losses.append(round(self.learn.loss.item(), 5))
        print("epoch", self.learn.epoch, "loss", self.losses[-1], "p", round(self.learn.model.drop.p, 3))


class Learner:
    def __init__(self, model, data, loss_func, opt, cbs):
        self.model, self.data, self.loss_func, self.opt, self.cbs = model, data, loss_func, opt, cbs
        for cb in cbs:
            cb.learn = self

    def callback(self, event):
        for cb in self.cbs:
            method = getattr(cb, event, None)
            if method is not None:
                method()

    def fit(self, n_epochs):
        self.n_epochs = n_epochs
        for self.epoch in range(n_epochs):
            self.model.train()
            self.callback("before_epoch")
            for xb, yb in self.data:
                self.pred = self.model(xb)
                self.loss = self.loss_func(self.pred, yb)
                self.loss.backward()
                self.opt.step()
                self.opt.zero_grad()
            self.callback("after_epoch")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(30, 128)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(128, 4)

    def forward(self, x):
        return self.fc2(self.drop(F.relu(self.fc1(x))))


model = MLP().to(device)
xs = torch.randn(20, 64, 30, device=device)
ys = xs[..., :4].argmax(-1)
learn = Learner(model, list(zip(xs, ys)), F.cross_entropy, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                [DropoutAnneal(0.5, 0.0), Recorder()])
learn.fit(3)
model.eval()
with torch.no_grad():
    acc = (model(xs.flatten(0, 1)).argmax(-1) == ys.flatten()).float().mean().item()
print("train acc", round(acc, 4), "param sum", round(sum(p.sum().item() for p in model.parameters()), 5))
