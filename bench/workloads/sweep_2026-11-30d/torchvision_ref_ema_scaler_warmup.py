# torchvision references/classification train.py train_one_epoch: MetricLogger/SmoothedValue meters via log_every, autocast + GradScaler with unscale_ and clip_grad_norm_, ExponentialMovingAverage(AveragedModel) every model_ema_steps, epoch-0 LinearLR warm-up stepped per iteration (detection reference style), cosine per epoch
import argparse
import datetime
import time
from collections import defaultdict, deque

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


# ---- references/classification/utils.py (trimmed, same shape) ----
class SmoothedValue:
    def __init__(self, window_size=20, fmt=None):
        if fmt is None:
            fmt = "{median:.4f} ({global_avg:.4f})"
        self.deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0
        self.fmt = fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def median(self):
        d = torch.tensor(list(self.deque))
        return d.median().item()

    @property
    def avg(self):
        d = torch.tensor(list(self.deque), dtype=torch.float32)
        return d.mean().item()

    @property
    def global_avg(self):
        return self.total / self.count

    @property
    def max(self):
        return max(self.deque)

    @property
    def value(self):
        return self.deque[-1]

    def __str__(self):
        return self.fmt.format(median=self.median, avg=self.avg, global_avg=self.global_avg, max=self.max, value=self.value)


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def __getattr__(self, attr):
        if attr in self.meters:
            return self.meters[attr]
        if attr in self.__dict__:
            return self.__dict__[attr]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{attr}'")

    def __str__(self):
        loss_str = []
        for name, meter in self.meters.items():
            if name.endswith("/s"):
                continue   # throughput differs run to run
            loss_str.append(f"{name}: {str(meter)}")
        return self.delimiter.join(loss_str)

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def log_every(self, iterable, print_freq, header=None):
        i = 0
        if not header:
            header = ""
        start_time = time.time()
        space_fmt = ":" + str(len(str(len(iterable)))) + "d"
        log_msg = self.delimiter.join([header, "[{0" + space_fmt + "}/{1}]", "{meters}"])
        for obj in iterable:
            yield obj
            if i % print_freq == 0 or i == len(iterable) - 1:
                print(log_msg.format(i, len(iterable), meters=str(self)))
            i += 1
        total_time = time.time() - start_time
        total_time_str = str(datetime.timedelta(seconds=int(total_time)))
        _ = total_time_str   # "{header} Total time: ..." is not printed: it differs run to run


class ExponentialMovingAverage(torch.optim.swa_utils.AveragedModel):
    """Maintains moving averages of model parameters using an exponential decay.
    ``ema_avg = decay * avg_model_param + (1 - decay) * model_param``"""

    def __init__(self, model, decay, device="cpu"):
        def ema_avg(avg_model_param, model_param, num_averaged):
            return decay * avg_model_param + (1 - decay) * model_param

        super().__init__(model, device, ema_avg, use_buffers=True)


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.inference_mode():
        maxk = max(topk)
        batch_size = target.size(0)
        if target.ndim == 2:
            target = target.max(dim=1)[1]

        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target[None])

        res = []
        for k in topk:
            correct_k = correct[:k].flatten().sum(dtype=torch.float32)
            res.append(correct_k * (100.0 / batch_size))
        return res


def set_weight_decay(model, weight_decay, norm_weight_decay=None):
    norm_classes = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm)
    params = {"other": [], "norm": []}

    def _add_params(module):
        for _name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            if norm_weight_decay is not None and isinstance(module, norm_classes):
                params["norm"].append(p)
            else:
                params["other"].append(p)
        for child in module.children():
            _add_params(child)

    _add_params(model)
    param_groups = []
    for key, decay in (("other", weight_decay), ("norm", norm_weight_decay)):
        if len(params[key]) > 0:
            param_groups.append({"params": params[key], "weight_decay": decay})
    return param_groups


# ---- a small ResNet-ish classifier ----
class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(out)))


class SmallResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU())
        self.layer1 = Block(32)
        self.layer2 = Block(32)
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, model_ema=None, scaler=None):
    model.train()
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
    metric_logger.add_meter("img/s", SmoothedValue(window_size=10, fmt="{value}"))

    lr_scheduler = None
    if epoch == 0:
        warmup_factor = 1.0 / 1000
        warmup_iters = min(1000, len(data_loader) - 1)
        lr_scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=warmup_factor, total_iters=warmup_iters)

    header = f"Epoch: [{epoch}]"
    for i, (image, target) in enumerate(metric_logger.log_every(data_loader, args.print_freq, header)):
        start_time = time.time()
        image, target = image.to(device), target.to(device)
        with torch.autocast("cuda", enabled=scaler is not None):
            output = model(image)
            loss = criterion(output, target)

        optimizer.zero_grad()
        if scaler is not None:
            scaler.scale(loss).backward()
            if args.clip_grad_norm is not None:
                # we should unscale the gradients of optimizer's assigned params if do gradient clipping
                scaler.unscale_(optimizer)
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            if args.clip_grad_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
            optimizer.step()

        if lr_scheduler is not None:
            lr_scheduler.step()

        if model_ema and i % args.model_ema_steps == 0:
            model_ema.update_parameters(model)
            if epoch < args.lr_warmup_epochs:
                # Reset ema buffer to keep copying weights during warmup period
                model_ema.n_averaged.fill_(0)

        acc1, acc5 = accuracy(output, target, topk=(1, 5))
        batch_size = image.shape[0]
        metric_logger.update(loss=loss.item(), lr=optimizer.param_groups[0]["lr"])
        metric_logger.meters["acc1"].update(acc1.item(), n=batch_size)
        metric_logger.meters["acc5"].update(acc5.item(), n=batch_size)
        metric_logger.meters["img/s"].update(batch_size / (time.time() - start_time))
    return metric_logger


def evaluate(model, criterion, data_loader, device, log_suffix=""):
    model.eval()
    metric_logger = MetricLogger(delimiter="  ")
    num_processed_samples = 0
    with torch.inference_mode():
        for image, target in data_loader:
            image = image.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            output = model(image)
            loss = criterion(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            batch_size = image.shape[0]
            metric_logger.update(loss=loss.item())
            metric_logger.meters["acc1"].update(acc1.item(), n=batch_size)
            metric_logger.meters["acc5"].update(acc5.item(), n=batch_size)
            num_processed_samples += batch_size
    print(f"{log_suffix} Acc@1 {metric_logger.acc1.global_avg:.3f} Acc@5 {metric_logger.acc5.global_avg:.3f}")
    return metric_logger.acc1.global_avg


def main(args):
    device = "cuda"
    torch.manual_seed(0)
    data_gen = torch.Generator().manual_seed(0)
    prototypes = torch.randn(10, 3, 16, 16, generator=data_gen)
    train_labels = torch.randint(0, 10, (1280,), generator=data_gen)
    train_images = prototypes[train_labels] + 1.5 * torch.randn(1280, 3, 16, 16, generator=data_gen)
    test_labels = torch.randint(0, 10, (256,), generator=data_gen)
    test_images = prototypes[test_labels] + 1.5 * torch.randn(256, 3, 16, 16, generator=data_gen)
    data_loader = DataLoader(TensorDataset(train_images, train_labels), batch_size=args.batch_size, shuffle=True,
                             num_workers=0, pin_memory=True)
    data_loader_test = DataLoader(TensorDataset(test_images, test_labels), batch_size=64, shuffle=False)

    model = SmallResNet(num_classes=10).to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    parameters = set_weight_decay(model, args.weight_decay, norm_weight_decay=args.norm_weight_decay)
    optimizer = torch.optim.SGD(parameters, lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay,
                                nesterov="nesterov" in args.opt)
    scaler = torch.amp.GradScaler("cuda") if args.amp else None

    main_lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs, eta_min=args.lr_min)

    model_ema = None
    if args.model_ema:
        adjust = args.batch_size * args.model_ema_steps / args.epochs
        alpha = 1.0 - args.model_ema_decay
        alpha = min(1.0, alpha * adjust)
        model_ema = ExponentialMovingAverage(model, device=device, decay=1.0 - alpha)

    print("Start training")
    for epoch in range(args.epochs):
        logger = train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, model_ema, scaler)
        main_lr_scheduler.step()
        acc = evaluate(model, criterion, data_loader_test, device=device)
        ema_acc = evaluate(model_ema, criterion, data_loader_test, device=device, log_suffix="EMA") if model_ema else None

    checksum = sum(p.double().sum() for p in model.parameters()).item()
    ema_checksum = sum(p.double().sum() for p in model_ema.module.parameters()).item()
    print(f"final loss avg {logger.loss.global_avg:.4f} acc1 avg {logger.acc1.global_avg:.4f} "
          f"test acc {acc:.3f} ema acc {ema_acc:.3f} lr {optimizer.param_groups[0]['lr']:.6f} "
          f"scale {scaler.get_scale():.1f} checksum {checksum:.4f} ema checksum {ema_checksum:.4f} "
          f"ema n_averaged {int(model_ema.n_averaged)}")


def get_args_parser():
    parser = argparse.ArgumentParser(description="PyTorch Classification Training (synthetic)")
    parser.add_argument("-b", "--batch-size", default=32, type=int)
    parser.add_argument("--epochs", default=5, type=int)
    parser.add_argument("--opt", default="sgd", type=str)
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--momentum", default=0.9, type=float)
    parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, dest="weight_decay")
    parser.add_argument("--norm-weight-decay", default=0.0, type=float)
    parser.add_argument("--label-smoothing", default=0.1, type=float)
    parser.add_argument("--lr-warmup-epochs", default=1, type=int)
    parser.add_argument("--lr-min", default=0.0, type=float)
    parser.add_argument("--print-freq", default=10, type=int)
    parser.add_argument("--amp", action="store_false", default=True)
    parser.add_argument("--clip-grad-norm", default=1.0, type=float)
    parser.add_argument("--model-ema", action="store_false", default=True)
    parser.add_argument("--model-ema-steps", type=int, default=4)
    parser.add_argument("--model-ema-decay", type=float, default=0.99)
    return parser


if __name__ == "__main__":
    args = get_args_parser().parse_args()
    main(args)
