# timm train.py train_one_epoch/validate: AverageMeter losses_m.update(loss.item(), input.size(0)) before backward, `with amp_autocast():` (contextlib.suppress when AMP is off), loss.backward(create_graph=second_order), dispatch_clip_grad, ModelEmaV2.update after the step, torch.cuda.synchronize(), num_updates, lr_scheduler.step_update(num_updates=...) per iteration and .step(epoch + 1, metric) per epoch
import argparse
import math
import time
from collections import OrderedDict
from contextlib import suppress
from copy import deepcopy

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class AverageMeter:
    """Computes and stores the average and current value"""

    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class ModelEmaV2(nn.Module):
    def __init__(self, model, decay=0.9999, device=None):
        super(ModelEmaV2, self).__init__()
        # make a copy of the model for accumulating moving average of weights
        self.module = deepcopy(model)
        self.module.eval()
        self.decay = decay
        self.device = device  # perform ema on different device from model if set
        if self.device is not None:
            self.module.to(device=device)

    def _update(self, model, update_fn):
        with torch.no_grad():
            for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
                if self.device is not None:
                    model_v = model_v.to(device=self.device)
                ema_v.copy_(update_fn(ema_v, model_v))

    def update(self, model):
        self._update(model, update_fn=lambda e, m: self.decay * e + (1. - self.decay) * m)

    def set(self, model):
        self._update(model, update_fn=lambda e, m: m)


class CosineLRScheduler:
    """timm.scheduler.CosineLRScheduler (t_in_epochs=False): warm-up then cosine, by update count."""

    def __init__(self, optimizer, t_initial, lr_min=0., warmup_t=0, warmup_lr_init=0., t_in_epochs=False):
        self.optimizer = optimizer
        self.param_group_field = "lr"
        self.base_values = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.t_initial, self.lr_min = t_initial, lr_min
        self.warmup_t, self.warmup_lr_init = warmup_t, warmup_lr_init
        self.t_in_epochs = t_in_epochs
        if self.warmup_t:
            self.warmup_steps = [(v - warmup_lr_init) / self.warmup_t for v in self.base_values]
            self.update_groups(self.warmup_lr_init)
        else:
            self.warmup_steps = [1 for _ in self.base_values]

    def _get_lr(self, t):
        if t < self.warmup_t:
            return [self.warmup_lr_init + t * s for s in self.warmup_steps]
        t = t - self.warmup_t
        return [self.lr_min + 0.5 * (lr_max - self.lr_min) * (1 + math.cos(math.pi * t / self.t_initial))
                for lr_max in self.base_values]

    def step(self, epoch, metric=None):
        if self.t_in_epochs:
            self.update_groups(self._get_lr(epoch))

    def step_update(self, num_updates, metric=None):
        if not self.t_in_epochs:
            self.update_groups(self._get_lr(num_updates))

    def update_groups(self, values):
        if not isinstance(values, (list, tuple)):
            values = [values] * len(self.optimizer.param_groups)
        for param_group, value in zip(self.optimizer.param_groups, values):
            param_group[self.param_group_field] = value


def dispatch_clip_grad(parameters, value, mode='norm', norm_type=2.0):
    if mode == 'norm':
        torch.nn.utils.clip_grad_norm_(parameters, value, norm_type=norm_type)
    elif mode == 'value':
        torch.nn.utils.clip_grad_value_(parameters, value)
    else:
        raise AssertionError(f"Unknown clip mode ({mode}).")


def model_parameters(model, exclude_head=False):
    if exclude_head:
        return [p for p in model.parameters()][:-2]
    else:
        return model.parameters()


def param_groups_weight_decay(model, weight_decay=1e-5, no_weight_decay_list=()):
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if param.ndim <= 1 or name.endswith(".bias") or name in no_weight_decay_list:
            no_decay.append(param)
        else:
            decay.append(param)
    return [{'params': no_decay, 'weight_decay': 0.}, {'params': decay, 'weight_decay': weight_decay}]


def accuracy(output, target, topk=(1,)):
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


class MixerBlock(nn.Module):
    def __init__(self, tokens, dim, drop=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, tokens * 2), nn.GELU(), nn.Linear(tokens * 2, tokens))
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(nn.Linear(dim, dim * 2), nn.GELU(), nn.Dropout(drop), nn.Linear(dim * 2, dim))

    def forward(self, x):
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class TinyMixer(nn.Module):
    def __init__(self, num_classes=10, dim=64, patch=4, image=16, depth=2):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, patch, patch)
        tokens = (image // patch) ** 2
        self.blocks = nn.Sequential(*[MixerBlock(tokens, dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(1))


def train_one_epoch(
        epoch, model, loader, optimizer, loss_fn, args,
        lr_scheduler=None, saver=None, output_dir=None, amp_autocast=suppress,
        loss_scaler=None, model_ema=None, mixup_fn=None):
    second_order = hasattr(optimizer, 'is_second_order') and optimizer.is_second_order
    batch_time_m = AverageMeter()
    data_time_m = AverageMeter()
    losses_m = AverageMeter()

    model.train()

    end = time.time()
    num_batches_per_epoch = len(loader)
    last_idx = num_batches_per_epoch - 1
    num_updates = epoch * num_batches_per_epoch
    for batch_idx, (input, target) in enumerate(loader):
        last_batch = batch_idx == last_idx
        data_time_m.update(time.time() - end)
        if not args.prefetcher:
            input, target = input.cuda(), target.cuda()
            if mixup_fn is not None:
                input, target = mixup_fn(input, target)

        with amp_autocast():
            output = model(input)
            loss = loss_fn(output, target)

        if not args.distributed:
            losses_m.update(loss.item(), input.size(0))

        optimizer.zero_grad()
        if loss_scaler is not None:
            loss_scaler(
                loss, optimizer,
                clip_grad=args.clip_grad,
                clip_mode=args.clip_mode,
                parameters=model_parameters(model, exclude_head='agc' in args.clip_mode),
                create_graph=second_order
            )
        else:
            loss.backward(create_graph=second_order)
            if args.clip_grad is not None:
                dispatch_clip_grad(
                    model_parameters(model, exclude_head='agc' in args.clip_mode),
                    value=args.clip_grad, mode=args.clip_mode
                )
            optimizer.step()

        if model_ema is not None:
            model_ema.update(model)

        torch.cuda.synchronize()
        num_updates += 1
        batch_time_m.update(time.time() - end)
        if last_batch or batch_idx % args.log_interval == 0:
            lrl = [param_group['lr'] for param_group in optimizer.param_groups]
            lr = sum(lrl) / len(lrl)

            print(
                'Train: {} [{:>4d}/{} ({:>3.0f}%)]  '
                'Loss: {loss.val:#.4g} ({loss.avg:#.4g})  '
                'LR: {lr:.3e}'.format(
                    epoch,
                    batch_idx, len(loader),
                    100. * batch_idx / last_idx,
                    loss=losses_m,
                    lr=lr))

        if lr_scheduler is not None:
            lr_scheduler.step_update(num_updates=num_updates, metric=losses_m.avg)

        end = time.time()
        # end for

    if hasattr(optimizer, 'sync_lookahead'):
        optimizer.sync_lookahead()

    return OrderedDict([('loss', losses_m.avg)])


def validate(model, loader, loss_fn, args, log_suffix=''):
    losses_m = AverageMeter()
    top1_m = AverageMeter()
    top5_m = AverageMeter()

    model.eval()

    with torch.no_grad():
        for _batch_idx, (input, target) in enumerate(loader):
            input = input.cuda()
            target = target.cuda()
            output = model(input)
            loss = loss_fn(output, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            reduced_loss = loss.data
            torch.cuda.synchronize()
            losses_m.update(reduced_loss.item(), input.size(0))
            top1_m.update(acc1.item(), output.size(0))
            top5_m.update(acc5.item(), output.size(0))
    metrics = OrderedDict([('loss', losses_m.avg), ('top1', top1_m.avg), ('top5', top5_m.avg)])
    print(f'Test{log_suffix}: Loss: {losses_m.avg:>7.4f}  Acc@1: {top1_m.avg:>7.4f}  Acc@5: {top5_m.avg:>7.4f}')
    return metrics


def main():
    parser = argparse.ArgumentParser(description='timm-style training (synthetic)')
    parser.add_argument('--epochs', type=int, default=4)
    parser.add_argument('--batch-size', type=int, default=48)
    parser.add_argument('--lr', type=float, default=2e-3)
    parser.add_argument('--weight-decay', type=float, default=0.05)
    parser.add_argument('--warmup-updates', type=int, default=30)
    parser.add_argument('--clip-grad', type=float, default=1.0)
    parser.add_argument('--clip-mode', type=str, default='norm')
    parser.add_argument('--model-ema-decay', type=float, default=0.998)
    parser.add_argument('--log-interval', type=int, default=10)
    parser.add_argument('--prefetcher', action='store_true', default=False)
    parser.add_argument('--distributed', action='store_true', default=False)
    parser.add_argument('--seed', type=int, default=42)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = "cuda"
    gen = torch.Generator().manual_seed(0)
    prototypes = torch.randn(10, 3, 16, 16, generator=gen)
    ytr = torch.randint(0, 10, (2400,), generator=gen)
    xtr = prototypes[ytr] + 2.0 * torch.randn(2400, 3, 16, 16, generator=gen)
    yva = torch.randint(0, 10, (480,), generator=gen)
    xva = prototypes[yva] + 2.0 * torch.randn(480, 3, 16, 16, generator=gen)
    loader_train = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size, shuffle=True, drop_last=True)
    loader_eval = DataLoader(TensorDataset(xva, yva), batch_size=96)

    model = TinyMixer().to(device)
    optimizer = torch.optim.AdamW(param_groups_weight_decay(model, args.weight_decay), lr=args.lr)
    model_ema = ModelEmaV2(model, decay=args.model_ema_decay)
    updates_per_epoch = len(loader_train)
    lr_scheduler = CosineLRScheduler(optimizer, t_initial=args.epochs * updates_per_epoch - args.warmup_updates,
                                     lr_min=1e-5, warmup_t=args.warmup_updates, warmup_lr_init=1e-5)
    train_loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1).to(device)
    validate_loss_fn = nn.CrossEntropyLoss().to(device)
    amp_autocast = suppress  # do nothing
    loss_scaler = None

    best_metric = None
    for epoch in range(0, args.epochs):
        train_metrics = train_one_epoch(
            epoch, model, loader_train, optimizer, train_loss_fn, args,
            lr_scheduler=lr_scheduler, amp_autocast=amp_autocast,
            loss_scaler=loss_scaler, model_ema=model_ema)
        eval_metrics = validate(model, loader_eval, validate_loss_fn, args)
        ema_eval_metrics = validate(model_ema.module, loader_eval, validate_loss_fn, args, log_suffix=' (EMA)')
        if lr_scheduler is not None:
            # step LR for next epoch
            lr_scheduler.step(epoch + 1, eval_metrics['top1'])
        if best_metric is None or eval_metrics['top1'] > best_metric:
            best_metric = eval_metrics['top1']

    checksum = sum(p.double().sum() for p in model.parameters()).item()
    ema_checksum = sum(p.double().sum() for p in model_ema.module.parameters()).item()
    print(f"final train loss {train_metrics['loss']:.4f} best top1 {best_metric:.4f} "
          f"ema top1 {ema_eval_metrics['top1']:.4f} lr {optimizer.param_groups[0]['lr']:.6e} "
          f"checksum {checksum:.4f} ema checksum {ema_checksum:.4f}")


if __name__ == '__main__':
    main()
