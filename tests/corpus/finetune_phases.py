"""torchvision's "Transfer learning" tutorial train_model(model, criterion, optimizer, scheduler,
num_epochs): each epoch runs `for phase in ['train', 'val']` with model.train()/model.eval(),
one loop over dataloaders[phase] (TensorDataset DataLoaders, drop_last so every batch has one
shape) whose body is shared by both phases: optimizer.zero_grad() in both, the forward under
torch.set_grad_enabled(phase == 'train'), torch.max for the predictions, backward and
optimizer.step() only `if phase == 'train'`, running_loss += loss.item() * inputs.size(0) and
running_corrects += torch.sum(preds == labels.data) per batch; the StepLR stepped after the
train phase; the best weights kept with copy.deepcopy(model.state_dict()) when the val accuracy
improves and loaded back at the end."""
import copy
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
steps = int(os.environ.get("CG_STEPS", "200"))
batch_size, train_batches, val_batches = 16, 10, 4
num_epochs = max(1, steps // train_batches)


def make_loader(n, shuffle):
    inputs = torch.randn(n * batch_size, 3, 8, 8)
    labels = (inputs.mean(dim=(1, 2, 3)) > 0).long() + 2 * (inputs[:, 0].mean(dim=(1, 2)) > 0).long()
    generator = torch.Generator().manual_seed(n)
    return DataLoader(TensorDataset(inputs, labels), batch_size=batch_size, shuffle=shuffle, drop_last=True,
                      generator=generator)


dataloaders = {"train": make_loader(train_batches, True), "val": make_loader(val_batches, False)}
dataset_sizes = {x: len(dataloaders[x]) * batch_size for x in ["train", "val"]}


def train_model(model, criterion, optimizer, scheduler, num_epochs=25):
    best_model_wts = copy.deepcopy(model.state_dict())
    best_acc = 0.0
    for epoch in range(num_epochs):
        for phase in ["train", "val"]:
            if phase == "train":
                model.train()
            else:
                model.eval()
            running_loss = 0.0
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                inputs = inputs.to(device)
                labels = labels.to(device)
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)
            if phase == "train":
                scheduler.step()
                last_loss = loss
            epoch_loss = running_loss / dataset_sizes[phase]
            epoch_acc = running_corrects.double() / dataset_sizes[phase]
            if epoch % 5 == 0:
                print(f"Epoch {epoch} {phase} Loss: {epoch_loss:.4f} Acc: {epoch_acc:.4f}")
            if phase == "val" and epoch_acc > best_acc:
                best_acc = epoch_acc
                best_model_wts = copy.deepcopy(model.state_dict())
    print(f"Best val Acc: {best_acc:4f}")
    model.load_state_dict(best_model_wts)
    return model, last_loss


model_ft = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 4, 4)).to(device)
criterion = nn.CrossEntropyLoss()
optimizer_ft = torch.optim.SGD(model_ft.parameters(), lr=0.01, momentum=0.9)
exp_lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)
model_ft, loss = train_model(model_ft, criterion, optimizer_ft, exp_lr_scheduler, num_epochs=num_epochs)
print(f"final loss {loss.item():.6f}")
print(f"checksum {sum(p.double().sum().item() for p in model_ft.parameters()):.6f}")
