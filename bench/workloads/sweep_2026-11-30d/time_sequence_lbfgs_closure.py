# pytorch/examples time_sequence_prediction/train.py: two LSTMCells unrolled in Python, double precision, LBFGS with a closure that prints loss.item(), a no_grad test with future steps
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

device = "cuda"


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double, device=input.device)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double, device=input.device)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double, device=input.device)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double, device=input.device)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for _i in range(future):  # if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=10, help='steps to run')
    opt = parser.parse_args()
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    # generate.py's sine waves, made here
    T, L, N = 20, 60, 40
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype('float64')
    input = torch.from_numpy(data[3:, :-1]).to(device)
    target = torch.from_numpy(data[3:, 1:]).to(device)
    test_input = torch.from_numpy(data[:3, :-1]).to(device)
    test_target = torch.from_numpy(data[:3, 1:]).to(device)
    # build the model
    seq = Sequence()
    seq.double()
    seq.to(device)
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    calls = 0
    # begin to train
    for i in range(opt.steps):
        print('STEP: ', i)

        def closure():
            global calls
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss: {:.4f}'.format(loss.item()))
            loss.backward()
            calls += 1
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 30
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss: {:.4f}'.format(loss.item()))
            y = pred.detach().cpu().numpy()
    checksum = sum(p.double().sum() for p in seq.parameters()).item()
    print(f"closure calls {calls} final test loss {loss.item():.4f} prediction tail {y[:, -1].sum():.4f} "
          f"param checksum {checksum:.4f}")
