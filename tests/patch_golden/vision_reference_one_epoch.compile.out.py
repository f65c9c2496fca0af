"""torchvision's references/classification/train.py train_one_epoch(model, criterion, optimizer,
data_loader, device, epoch, args, model_ema=None, scaler=None): the loop runs over
metric_logger.log_every(data_loader, print_freq, header) (a generator that yields the batches
and prints now and then); the forward under torch.autocast("cuda", enabled=scaler is not None);
zero_grad, then either scaler.scale(loss).backward() with unscale_ + clip_grad_norm_ when
args.clip_grad_norm is set, scaler.step and scaler.update, or the plain backward/clip/step; an
ExponentialMovingAverage (an AveragedModel subclass) updated every args.model_ema_steps
iterations; metric_logger.update(loss=loss.item(), lr=param_groups[0]["lr"]) per batch. main()
builds args as an argparse.Namespace (amp only on cuda: the GradScaler is None on the CPU) and
steps a SequentialLR (LinearLR warmup, then CosineAnnealingLR) per epoch after train_one_epoch."""
import argparse
import os
from collections import defaultdict

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))


class MetricLogger:
    def __init__(self, delimiter="  "):
        self.meters, self.delimiter = defaultdict(list), delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            self.meters[k].append(v)

    def __str__(self):
        return self.delimiter.join(f"{k}: {sum(v[-20:]) / len(v[-20:]):.4f}" for k, v in self.meters.items())

    def log_every(self, iterable, print_freq, header=""):
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0 or i == len(iterable) - 1:
                print(f"{header} [{i}/{len(iterable)}] {self}")


class ExponentialMovingAverage(torch.optim.swa_utils.AveragedModel):
    def __init__(self, model, decay, device="cpu"):
        def ema_avg(avg_model_param, model_param, num_averaged):
            return decay * avg_model_param + (1 - decay) * model_param

        super().__init__(model, device, ema_avg, use_buffers=True)


def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, model_ema=None, scaler=None):
    model.train()
    metric_logger = MetricLogger(delimiter="  ")
    header = f"Epoch: [{epoch}]"
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for i, (image, target) in enumerate(metric_logger.log_every(data_loader, args.print_freq, header)):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        image, target = image.to(device), target.to(device)
        with torch.autocast("cuda", enabled=scaler is not None):
            output = _cg_compiled_model(image)
            loss = criterion(output, target)
        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            if args.clip_grad_norm is not None:
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if args.clip_grad_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            optimizer.step()
        if model_ema and i % args.model_ema_steps == 0:
            model_ema.update_parameters(model)
        metric_logger.update(loss=loss.item(), lr=optimizer.param_groups[0]["lr"])
    return loss


def main(args):
    data_loader = [(torch.randn(16, 3, 8, 8, device=device), torch.randint(0, 10, (16,), device=device))
                   for _ in range(10)]
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(16, 10)).to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    scaler = torch.amp.GradScaler("cuda") if args.amp and device == "cuda" else None
    args.epochs = max(1, steps // len(data_loader))
    warmup_lr_scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=args.lr_warmup_decay,
                                                            total_iters=args.lr_warmup_epochs)
    main_lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, args.epochs - args.lr_warmup_epochs))
    lr_scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup_lr_scheduler, main_lr_scheduler],
                                                         milestones=[args.lr_warmup_epochs])
    model_ema = ExponentialMovingAverage(model, decay=1.0 - args.model_ema_decay, device=device) if args.model_ema else None
    for epoch in range(args.start_epoch, args.epochs):
        loss = train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, model_ema, scaler)
        lr_scheduler.step()
    print(f"final loss {loss.item():.6f}")
    print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")
    print(f"checksum {sum(p.double().sum().item() for p in model_ema.parameters()):.6f}")


if __name__ == "__main__":
    main(argparse.Namespace(amp=device == "cuda", clip_grad_norm=1.0, model_ema=True, model_ema_steps=4,
                            model_ema_decay=0.01, print_freq=5, lr=0.1, momentum=0.9, weight_decay=1e-4,
                            label_smoothing=0.1, lr_warmup_epochs=3, lr_warmup_decay=0.1, epochs=20,
                            start_epoch=0))
