"""Does a graphed callable (torch.cuda.make_graphed_callables, fwd_bwd's helper) recompute a
checkpointed dropout with the mask its forward drew? The forward and backward are two graphs;
torch.utils.checkpoint saves the RNG state in the forward and restores it in the backward's
recompute. Here y = dropout(x) * w with w all ones, so w's gradient is the sum over the batch
of the mask the backward recomputed (times x / (1 - p)), and the forward's own output y summed
over the batch is what it must equal. Prints, for eager and for the graphed callable, the
largest difference between the two over several replays (0: the same mask).

    python bench/checkpoint_dropout_probe.py
"""
import torch
from torch.utils.checkpoint import checkpoint


class Block(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return checkpoint(lambda t: torch.nn.functional.dropout(t, 0.5, training=True) * self.w, x,
                          use_reentrant=False)


def worst(module, steps=5):
    gap = 0.0
    for _ in range(steps):
        x = torch.rand(64, 256, device="cuda") + 1.0
        module.w.grad = None
        y = module(x)
        y.sum().backward()
        gap = max(gap, (module.w.grad - y.detach().sum(0)).abs().max().item())
    return gap


def main():
    torch.manual_seed(0)
    eager = Block(256).cuda()
    print(f"eager: largest |grad(w) - sum(y)| = {worst(eager):.4g}")
    graphed_block = Block(256).cuda()
    sample = torch.rand(64, 256, device="cuda") + 1.0
    graphed = torch.cuda.make_graphed_callables(graphed_block, (sample,))
    print(f"graphed: largest |grad(w) - sum(y)| = {worst(graphed):.4g}")


if __name__ == "__main__":
    main()
