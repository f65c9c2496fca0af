# detection-style loss dict (torchvision references train_one_epoch): losses = model(images, targets); sum(losses.values()); loss_dict_reduced = {k: v.item()} logged
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
device = "cuda"
num_classes = 5
num_anchors = 4


class ToyBoxes(Dataset):
    def __init__(self, n=256):
        self.images = torch.rand(n, 3, 32, 32)
        self.labels = torch.randint(0, num_classes, (n, num_anchors))
        self.boxes = torch.rand(n, num_anchors, 4) * 32

    def __len__(self):
        return len(self.images)

    def __getitem__(self, idx):
        target = {"boxes": self.boxes[idx], "labels": self.labels[idx]}
        return self.images[idx], target


def collate_fn(batch):
    return tuple(zip(*batch))


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.cls_head = nn.Linear(32, num_anchors * num_classes)
        self.box_head = nn.Linear(32, num_anchors * 4)
        self.obj_head = nn.Linear(32, num_anchors)

    def forward(self, images, targets=None):
        x = torch.stack(images)
        feats = self.backbone(x)
        logits = self.cls_head(feats).view(-1, num_anchors, num_classes)
        boxes = self.box_head(feats).view(-1, num_anchors, 4)
        objectness = self.obj_head(feats)
        if self.training:
            gt_labels = torch.stack([t["labels"] for t in targets])
            gt_boxes = torch.stack([t["boxes"] for t in targets])
            return {
                "loss_classifier": F.cross_entropy(logits.flatten(0, 1), gt_labels.flatten()),
                "loss_box_reg": F.smooth_l1_loss(boxes, gt_boxes / 32.0),
                "loss_objectness": F.binary_cross_entropy_with_logits(objectness, (gt_labels > 0).float()),
            }
        return [{"boxes": b, "labels": c.argmax(-1)} for b, c in zip(boxes, logits)]


data_loader = DataLoader(ToyBoxes(), batch_size=8, shuffle=True, collate_fn=collate_fn)
model = TinyDetector().to(device)
params = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.SGD(params, lr=0.02, momentum=0.9, weight_decay=1e-4)
lr_scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[3], gamma=0.1)
print_freq = 16

iters = 0
for epoch in range(5):
    model.train()
    for i, (images, targets) in enumerate(data_loader):
        images = list(image.to(device) for image in images)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]

        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())

        loss_dict_reduced = {k: v.item() for k, v in loss_dict.items()}
        loss_value = sum(loss_dict_reduced.values())
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            print(loss_dict_reduced)
            sys.exit(1)

        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        iters += 1
        if i % print_freq == 0:
            logged = " ".join(f"{k}: {v:.4f}" for k, v in loss_dict_reduced.items())
            print(f"Epoch: [{epoch}] [{i}/{len(data_loader)}] loss: {loss_value:.4f} {logged} "
                  f"lr: {optimizer.param_groups[0]['lr']:.4f}")
    lr_scheduler.step()

print("iters", iters)
print(f"final loss {losses.item():.4f}")
print("checksum", round(sum(p.double().sum() for p in model.parameters()).item(), 4))
