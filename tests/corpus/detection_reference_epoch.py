"""torchvision's references/detection engine.py train_one_epoch(model, optimizer, data_loader,
device, epoch, print_freq): the model in train mode takes (images, targets), a list of image
tensors and a list of dicts of tensors ("boxes", "labels"), and returns a dict of losses
("loss_classifier", "loss_box_reg"); losses = sum(loss for loss in loss_dict.values()); a
reduce_dict (the identity without distributed) for logging, loss_value = losses_reduced.item()
and `if not math.isfinite(loss_value): print(...); sys.exit(1)`; zero_grad, losses.backward(),
optimizer.step(); a warmup LinearLR created inside train_one_epoch only when epoch == 0 and
stepped per iteration (`if lr_scheduler is not None`); a MetricLogger-like log_every generator.
main() builds SGD over the params that require grad and a MultiStepLR stepped per epoch."""
import math
import os
import sys

import torch
from torch import nn

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
num_classes, boxes_per_image, batch_size = 5, 3, 4


def reduce_dict(input_dict, average=True):
    return input_dict  # world_size == 1


def log_every(iterable, print_freq, header):
    for i, obj in enumerate(iterable):
        yield obj
        if i % print_freq == 0 or i == len(iterable) - 1:
            print(f"{header} [{i}/{len(iterable)}]")


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                      nn.Flatten())
        self.box_head = nn.Sequential(nn.Linear(16 + 4, 32), nn.ReLU())
        self.cls_score, self.bbox_pred = nn.Linear(32, num_classes), nn.Linear(32, 4)

    def forward(self, images, targets=None):
        features = self.backbone(torch.stack(images))
        proposals = [t["boxes"] + 0.1 for t in targets] if targets is not None else [
            torch.full((boxes_per_image, 4), 0.5, device=features.device) for _ in images]
        rois = torch.cat([torch.cat([f.expand(len(p), -1), p], 1) for f, p in zip(features, proposals)])
        x = self.box_head(rois)
        class_logits, box_regression = self.cls_score(x), self.bbox_pred(x)
        if not self.training:
            return [{"boxes": b, "scores": s.softmax(-1).max(-1).values}
                    for b, s in zip(box_regression.split(boxes_per_image), class_logits.split(boxes_per_image))]
        labels = torch.cat([t["labels"] for t in targets])
        regression_targets = torch.cat([t["boxes"] for t in targets])
        loss_classifier = nn.functional.cross_entropy(class_logits, labels)
        loss_box_reg = nn.functional.smooth_l1_loss(box_regression, regression_targets, beta=1 / 9)
        return {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg}


def train_one_epoch(model, optimizer, data_loader, device, epoch, print_freq):
    model.train()
    header = f"Epoch: [{epoch}]"
    lr_scheduler = None
    if epoch == 0:
        warmup_factor = 1.0 / 1000
        warmup_iters = min(1000, len(data_loader) - 1)
        lr_scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=warmup_factor, total_iters=warmup_iters)
    for images, targets in log_every(data_loader, print_freq, header):
        images = list(image.to(device) for image in images)
        targets = [{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in t.items()} for t in targets]
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())
        loss_dict_reduced = reduce_dict(loss_dict)
        losses_reduced = sum(loss for loss in loss_dict_reduced.values())
        loss_value = losses_reduced.item()
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            print(loss_dict_reduced)
            sys.exit(1)
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        if lr_scheduler is not None:
            lr_scheduler.step()
    return losses


def make_batch():
    images = tuple(torch.rand(3, 32, 32, device=device) for _ in range(batch_size))
    targets = tuple({"boxes": torch.rand(boxes_per_image, 4, device=device).sort(-1).values,
                     "labels": torch.randint(1, num_classes, (boxes_per_image,), device=device),
                     "image_id": i} for i in range(batch_size))
    return images, targets


def main():
    data_loader = [make_batch() for _ in range(10)]
    model = TinyDetector().to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
    epochs = max(1, steps // len(data_loader))
    lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[int(epochs * 0.7), int(epochs * 0.9)],
                                                        gamma=0.1)
    for epoch in range(epochs):
        losses = train_one_epoch(model, optimizer, data_loader, device, epoch, print_freq=5)
        lr_scheduler.step()
        model.eval()
        with torch.no_grad():
            detections = model(list(data_loader[0][0]))
        print(f"epoch {epoch}: {len(detections)} images, mean score {torch.cat([d['scores'] for d in detections]).mean():.4f}")
    print(f"final loss {losses.item():.6f}")
    print(f"checksum {sum(p.double().sum().item() for p in model.parameters()):.6f}")


if __name__ == "__main__":
    main()
