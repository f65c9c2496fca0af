# torchvision-detection-style model returning a loss dict; each step's detached dict kept in a log for epoch means
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
device = "cuda"


class TinyKeypointNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1),
                                      nn.ReLU(), nn.Flatten())
        self.heatmap_head = nn.Linear(8 * 8 * 8, 64)
        self.class_head = nn.Linear(8 * 8 * 8, 4)

    def forward(self, images, heatmaps, classes):
        feats = self.backbone(images)
        return {
            "loss_heatmap": F.mse_loss(self.heatmap_head(feats), heatmaps),
            "loss_classifier": F.cross_entropy(self.class_head(feats), classes),
        }


model = TinyKeypointNet().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
data = [(torch.randn(16, 1, 16, 16), torch.rand(16, 64), torch.randint(0, 4, (16,))) for _ in range(15)]

for epoch in range(3):
    log = []
    for images, heatmaps, classes in data:
        images, heatmaps, classes = images.to(device), heatmaps.to(device), classes.to(device)
        loss_dict = model(images, heatmaps, classes)
        losses = sum(loss for loss in loss_dict.values())
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        log.append({k: v.detach() for k, v in loss_dict.items()})
    means = {k: round(torch.stack([entry[k] for entry in log]).mean().item(), 4) for k in log[0]}
    print(f"epoch {epoch}", means)
print("final", round(losses.item(), 4))
