# pytorch/examples super_resolution/main.py + super_resolve.py: ESPCN with pixel shuffle, train(epoch) summing loss.item() before backward, test() PSNR via log10(1 / mse.item()), checkpoint(epoch) torch.save of the whole model, then the saved model reloaded and run with grad on
import argparse
import os
import tempfile
from math import log10

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()

        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(32, 32, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(32, 16, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(16, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        x = self.pixel_shuffle(self.conv4(x))
        return x

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv4.weight)


parser = argparse.ArgumentParser(description='PyTorch Super Res Example')
parser.add_argument('--upscale_factor', type=int, default=3)
parser.add_argument('--batchSize', type=int, default=16)
parser.add_argument('--testBatchSize', type=int, default=10)
parser.add_argument('--nEpochs', type=int, default=3)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--seed', type=int, default=123)
opt = parser.parse_args()

torch.manual_seed(opt.seed)
device = "cuda"
out_dir = tempfile.mkdtemp()

print('===> Loading datasets')


def make_set(n, generator):
    # smooth "luminance" images: low-frequency noise upsampled, the input its 3x box-downsampled copy
    coarse = torch.rand(n, 1, 6, 6, generator=generator)
    target = F.interpolate(coarse, size=(36, 36), mode='bicubic', align_corners=False).clamp(0, 1)
    return TensorDataset(F.avg_pool2d(target, opt.upscale_factor), target)


data_gen = torch.Generator().manual_seed(0)
train_set = make_set(1000, data_gen)
test_set = make_set(100, data_gen)
training_data_loader = DataLoader(dataset=train_set, num_workers=0, batch_size=opt.batchSize, shuffle=True)
testing_data_loader = DataLoader(dataset=test_set, num_workers=0, batch_size=opt.testBatchSize, shuffle=False)

print('===> Building model')
model = Net(upscale_factor=opt.upscale_factor).to(device)
criterion = nn.MSELoss()

optimizer = optim.Adam(model.parameters(), lr=opt.lr)


def train(epoch):
    epoch_loss = 0
    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = batch[0].to(device), batch[1].to(device)

        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()

        if iteration % 20 == 0:
            print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration, len(training_data_loader), loss.item()))

    print("===> Epoch {} Complete: Avg. Loss: {:.4f}".format(epoch, epoch_loss / len(training_data_loader)))
    return epoch_loss / len(training_data_loader)


def test():
    avg_psnr = 0
    with torch.no_grad():
        for batch in testing_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)

            prediction = model(input)
            mse = criterion(prediction, target)
            psnr = 10 * log10(1 / mse.item())
            avg_psnr += psnr
    print("===> Avg. PSNR: {:.4f} dB".format(avg_psnr / len(testing_data_loader)))
    return avg_psnr / len(testing_data_loader)


def checkpoint(epoch):
    model_out_path = os.path.join(out_dir, "model_epoch_{}.pth".format(epoch))
    torch.save(model, model_out_path)
    print("Checkpoint saved to model_epoch_{}.pth".format(epoch))
    return model_out_path


for epoch in range(1, opt.nEpochs + 1):
    avg_loss = train(epoch)
    psnr = test()
    path = checkpoint(epoch)

# super_resolve.py: load the saved model and upscale one image (no no_grad there)
loaded = torch.load(path, weights_only=False)
loaded = loaded.to(device)
img = test_set[0][0].unsqueeze(0).to(device)
out = loaded(img)
out = out.cpu()
out_img_y = out[0].detach().numpy()
print(f"final avg loss {avg_loss:.4f} psnr {psnr:.4f} upscaled mean {out_img_y.mean():.4f} "
      f"param checksum {sum(p.double().sum() for p in model.parameters()).item():.4f}")
