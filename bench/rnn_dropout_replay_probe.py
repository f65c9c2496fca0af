"""Does a CUDA graph of an RNN with dropout between its layers draw new masks at each replay?

cuDNN keeps the RNN's dropout state in a buffer of its own (not the CUDA generator whose offset
tune reads at each replay), so tune tells such a step apart by its module
(``tuner.harness.random_in_training``) and flags a difference from eager instead of failing it.
That is only right if the graph's replays draw fresh masks, as eager does at each call: a graph
that replayed the capture's mask would train with one fixed mask, a different model, and patch
must not emit it. This probe answers it on the GPU, for LSTM and GRU:

- ``replays_differ``: one input, three replays of a captured training forward: different
  outputs mean new masks;
- ``eval_replays_equal``: the same with dropout off (``p=0``): equal outputs, so the difference
  above is the masks', not the replay's;
- ``graphed_callable_differs``: the same through ``torch.cuda.make_graphed_callables`` (patch's
  fwd_bwd scope);
- the loss of N training steps, eager and as a full-iteration graph (forward, backward, SGD
  step) from the same weights: a graph of one fixed mask would still train, so the loss is
  printed beside eager's for the reader, not judged.

    python bench/rnn_dropout_replay_probe.py [--steps 200] [--json OUT.json]
"""
import argparse
import json

import torch
from torch import nn


def build(kind: str, dropout: float, seed: int = 0):
    torch.manual_seed(seed)
    rnn = (nn.LSTM if kind == "lstm" else nn.GRU)(32, 32, num_layers=2, dropout=dropout).cuda()
    head = nn.Linear(32, 1).cuda()
    return rnn, head


def side_warmup(fn, times: int = 3) -> None:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(times):
            fn()
    torch.cuda.current_stream().wait_stream(stream)


def replays(kind: str, dropout: float) -> list:
    """Outputs of three replays of one captured training forward on one input."""
    rnn, _ = build(kind, dropout)
    x = torch.randn(10, 4, 32, device="cuda")
    side_warmup(lambda: rnn(x))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out, _ = rnn(x)
    seen = []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        seen.append(out.clone())
    return seen


def graphed_callable_differs(kind: str) -> bool:
    rnn, _ = build(kind, 0.5)
    x = torch.randn(10, 4, 32, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(rnn, (x,))
    first = graphed(x)[0].detach().clone()
    second = graphed(x)[0].detach().clone()
    return not torch.equal(first, second)


def losses(kind: str, dropout: float, steps: int, graphed: bool) -> list:
    """The loss at each step of SGD on a fixed regression batch, eager or as one graph of the
    whole step (forward, backward, optimizer)."""
    rnn, head = build(kind, dropout)
    params = [*rnn.parameters(), *head.parameters()]
    optimizer = torch.optim.SGD(params, lr=0.05)
    torch.manual_seed(1)
    x = torch.randn(10, 4, 32, device="cuda")
    y = torch.randn(10, 4, 1, device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=False)
        out, _ = rnn(x)
        loss = (head(out) - y).pow(2).mean()
        loss.backward()
        optimizer.step()
        return loss

    if not graphed:
        return [step().item() for _ in range(steps)]
    side_warmup(step)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step()
    seen = []
    for _ in range(steps):
        graph.replay()
        seen.append(loss.item())
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version()}
    for kind in ("lstm", "gru"):
        on, off = replays(kind, 0.5), replays(kind, 0.0)
        row = {"replays_differ": [not torch.equal(on[0], o) for o in on[1:]],
               "eval_replays_equal": [torch.equal(off[0], o) for o in off[1:]],
               "graphed_callable_differs": graphed_callable_differs(kind)}
        for dropout in (0.5, 0.0):
            eager, graph = losses(kind, dropout, args.steps, False), losses(kind, dropout, args.steps, True)
            tail = max(args.steps // 10, 1)
            row[f"p{dropout}"] = {"eager_first_last": [eager[0], sum(eager[-tail:]) / tail],
                                  "graph_first_last": [graph[0], sum(graph[-tail:]) / tail],
                                  "graph_losses_vary": len(set(graph[-tail:])) > 1}
        out[kind] = row
        print(kind, json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(out, handle, indent=1)


if __name__ == "__main__":
    main()
