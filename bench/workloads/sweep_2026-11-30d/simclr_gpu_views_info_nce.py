# sthalles/SimCLR simclr.py: SimCLR class with info_nce_loss (labels from torch.arange moved .to(device), boolean-mask selection of positives/negatives), GradScaler/autocast, n_iter with log_every_n_steps top-k accuracy, CosineAnnealingLR stepped after epoch 10; the two augmented views made on the GPU
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler
from torch.utils.data import DataLoader, TensorDataset


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def gpu_views(images):
    """random resized crop (a random affine warp), horizontal flip, colour jitter and noise, all on the GPU"""
    b = images.size(0)
    scale = 0.6 + 0.4 * torch.rand(b, device=images.device)
    shift = (torch.rand(b, 2, device=images.device) - 0.5) * (1 - scale)[:, None] * 2
    flip = torch.where(torch.rand(b, device=images.device) < 0.5, -1.0, 1.0)
    theta = torch.zeros(b, 2, 3, device=images.device)
    theta[:, 0, 0] = scale * flip
    theta[:, 1, 1] = scale
    theta[:, :, 2] = shift
    grid = F.affine_grid(theta, list(images.shape), align_corners=False)
    out = F.grid_sample(images, grid, align_corners=False, padding_mode="reflection")
    brightness = 1 + 0.8 * (torch.rand(b, 1, 1, 1, device=images.device) - 0.5)
    tint = 0.2 * (torch.rand(b, 3, 1, 1, device=images.device) - 0.5)
    return out * brightness + tint + 0.05 * torch.randn_like(out)


class ResNetSimCLR(nn.Module):
    def __init__(self, out_dim):
        super(ResNetSimCLR, self).__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, out_dim))
        dim_mlp = self.backbone[-1].in_features
        # add mlp projection head
        self.backbone[-1] = nn.Sequential(nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.backbone[-1])

    def forward(self, x):
        return self.backbone(x)


class SimCLR(object):

    def __init__(self, *args, **kwargs):
        self.args = kwargs['args']
        self.model = kwargs['model'].to(self.args.device)
        self.optimizer = kwargs['optimizer']
        self.scheduler = kwargs['scheduler']
        self.criterion = torch.nn.CrossEntropyLoss().to(self.args.device)

    def info_nce_loss(self, features):

        labels = torch.cat([torch.arange(self.args.batch_size) for i in range(self.args.n_views)], dim=0)
        labels = (labels.unsqueeze(0) == labels.unsqueeze(1)).float()
        labels = labels.to(self.args.device)

        features = F.normalize(features, dim=1)

        similarity_matrix = torch.matmul(features, features.T)

        # discard the main diagonal from both: labels and similarities matrix
        mask = torch.eye(labels.shape[0], dtype=torch.bool).to(self.args.device)
        labels = labels[~mask].view(labels.shape[0], -1)
        similarity_matrix = similarity_matrix[~mask].view(similarity_matrix.shape[0], -1)

        # select and combine multiple positives
        positives = similarity_matrix[labels.bool()].view(labels.shape[0], -1)

        # select only the negatives the negatives
        negatives = similarity_matrix[~labels.bool()].view(similarity_matrix.shape[0], -1)

        logits = torch.cat([positives, negatives], dim=1)
        labels = torch.zeros(logits.shape[0], dtype=torch.long).to(self.args.device)

        logits = logits / self.args.temperature
        return logits, labels

    def train(self, train_loader):

        scaler = GradScaler(enabled=self.args.fp16_precision)

        n_iter = 0
        print(f"Start SimCLR training for {self.args.epochs} epochs.")

        for epoch_counter in range(self.args.epochs):
            for images, _ in train_loader:
                images = images.to(self.args.device)
                views = [gpu_views(images) for _ in range(self.args.n_views)]
                images = torch.cat(views, dim=0)

                with torch.autocast("cuda", enabled=self.args.fp16_precision):
                    features = self.model(images)
                    logits, labels = self.info_nce_loss(features)
                    loss = self.criterion(logits, labels)

                self.optimizer.zero_grad()

                scaler.scale(loss).backward()

                scaler.step(self.optimizer)
                scaler.update()

                if n_iter % self.args.log_every_n_steps == 0:
                    top1, top5 = accuracy(logits, labels, topk=(1, 5))
                    print(f"step {n_iter} loss {loss.item():.4f} acc/top1 {top1[0].item():.4f} "
                          f"acc/top5 {top5[0].item():.4f} lr {self.scheduler.get_last_lr()[0]:.6f}")

                n_iter += 1

            # warmup for the first 10 epochs
            if epoch_counter >= 10:
                self.scheduler.step()
            print(f"Epoch: {epoch_counter}\tLoss: {loss.item():.4f}\tTop1 accuracy: {top1[0].item():.4f}")

        print("Training has finished.")
        return n_iter, loss


def main():
    parser = argparse.ArgumentParser(description='PyTorch SimCLR (synthetic images, GPU views)')
    parser.add_argument('--epochs', default=12, type=int)
    parser.add_argument('-b', '--batch-size', default=32, type=int)
    parser.add_argument('--lr', default=0.0003, type=float)
    parser.add_argument('--wd', default=1e-4, type=float)
    parser.add_argument('--seed', default=0, type=int)
    parser.add_argument('--fp16-precision', action='store_false', default=True)
    parser.add_argument('--out_dim', default=32, type=int)
    parser.add_argument('--log-every-n-steps', default=10, type=int)
    parser.add_argument('--temperature', default=0.07, type=float)
    parser.add_argument('--n-views', default=2, type=int)
    args = parser.parse_args()
    args.device = "cuda"
    torch.manual_seed(args.seed)

    gen = torch.Generator().manual_seed(0)
    images = torch.rand(512, 3, 24, 24, generator=gen)
    train_loader = DataLoader(TensorDataset(images, torch.zeros(512, dtype=torch.long)), batch_size=args.batch_size,
                              shuffle=True, num_workers=0, pin_memory=True, drop_last=True)

    model = ResNetSimCLR(out_dim=args.out_dim)
    optimizer = torch.optim.Adam(model.parameters(), args.lr, weight_decay=args.wd)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(train_loader), eta_min=0, last_epoch=-1)

    simclr = SimCLR(model=model, optimizer=optimizer, scheduler=scheduler, args=args)
    n_iter, loss = simclr.train(train_loader)
    checksum = sum(p.double().sum() for p in model.parameters()).item()
    print(f"iterations {n_iter} final loss {loss.item():.4f} checksum {checksum:.4f}")


if __name__ == '__main__':
    main()
