import argparse

import torch
from torch import nn

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    model = nn.Linear(8, 8).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 8, device="cuda")
    _cg_compiled_model = torch.compile(model, mode="reduce-overhead")  # cg-advise: scope compile

    for i in range(args.steps):
        torch.compiler.cudagraph_mark_step_begin()  # cg-advise: a new step for compile's CUDA graphs
        opt.zero_grad()
        loss = _cg_compiled_model(x).pow(2).mean()
        loss.backward()
        opt.step()
