# CIFAR-tutorial CNN with BatchNorm; accuracy counted on the GPU (`correct += (pred == y).sum()`) before backward
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"

model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(32, 10),
).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
loader = [(torch.randn(32, 3, 16, 16), torch.randint(0, 10, (32,))) for _ in range(12)]

for epoch in range(3):
    model.train()
    correct, seen = 0, 0
    for inputs, labels in loader:
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        _, predicted = outputs.max(1)
        correct += (predicted == labels).sum()
        seen += labels.size(0)
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f} acc {100.0 * correct.item() / seen:.2f}")
print("bn running_var sum", round(model[1].running_var.sum().item(), 4))
