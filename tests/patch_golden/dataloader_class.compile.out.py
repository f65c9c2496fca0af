import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Trainer:
    def __init__(self, model):
        self.model = model.cuda()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05)

    def fit(self, dataset, epochs=2):
        loader = DataLoader(dataset, batch_size=16, shuffle=True)
        _cg_compiled_self_model = torch.compile(self.model, mode="reduce-overhead")  # cg-advise: scope compile

        for _ in range(epochs):
            for features, target in loader:
                torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
                features, target = features.cuda(non_blocking=True), target.cuda(non_blocking=True)
                self.optimizer.zero_grad()
                loss = nn.functional.mse_loss(_cg_compiled_self_model(features), target)
                loss.backward()
                self.optimizer.step()


Trainer(nn.Linear(4, 1)).fit(TensorDataset(torch.randn(2048, 4), torch.randn(2048, 1)))
