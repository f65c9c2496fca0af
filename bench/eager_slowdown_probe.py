"""How much slower does a model's eager step run once ``make_graphed_callables`` has graphed it,
on the tiny steps where tune's fwd_bwd figures ran above the prediction? Tune's paired timing
takes its eager windows in the graph's own process and divides the paired speedup by 1.07
(tuner/search.py GRAPHED_EAGER_SLOWDOWN), a figure probed on one MLP of 16 parameter tensors.
Over the H200 tunes of steps under 1.2 ms, fwd_bwd's paired gain read 1.16x (median) the
speedup of tune's own eager process over the graph's windows (bench/unseen_eval.py), on models
of 2 to 10 parameter tensors: more slowdown than 1.07, and not per parameter.

One process times, in windows of about 50 ms taken round-robin (a host that drifts moves every
kind alike), the steps of small models (zero_grad, forward, loss, backward, optimizer step):

1. before anything is graphed: a never-graphed copy, and the copy that will be graphed;
2. after graphing that copy: the never-graphed copy again, the graphed copy's eager path (what
   tune's eager windows run) and its graph.

From these: graphing's slowdown of its own model's eager step (after / before, the same
object), of another model in the process (the never-graphed copy after / before: a slowdown of
the whole process), and the part local to the graphed model (its eager path over the
never-graphed copy, both after). ``--no-graph`` runs both phases without graphing: the drift
between the phases alone.

    python bench/eager_slowdown_probe.py OUT.json [--no-graph] [--rounds 12] [--window-ms 50]
    python bench/eager_slowdown_probe.py --summary OUT1.json OUT2.json ...
"""

import argparse
import json
import statistics
import time

from paired_windows_probe import window_ms   # ms/step of ``count`` steps between CUDA events

# name: (layer widths, batch, optimizer): the shapes of the corpus's tiny loops
# (tests/corpus/basic_for.py: Linear(32, 64), ReLU, Linear(64, 1), batch 16, SGD)
MODELS = {
    "linear P2 adam": ((32, 1), 64, "Adam"),
    "two linear P4 sgd": ((32, 64, 1), 16, "SGD"),
    "two linear P4 adam": ((32, 64, 1), 16, "Adam"),
    "mlp P16 sgd": ((256,) * 9, 64, "SGD"),
    "mlp P48 adam": ((256,) * 25, 64, "Adam"),
}


def build(torch, widths, batch, optimizer):
    layers = []
    for n_in, n_out in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).cuda()
    x = torch.randn(batch, widths[0], device="cuda")
    y = torch.randn(batch, widths[-1], device="cuda")
    return model, getattr(torch.optim, optimizer)(model.parameters(), lr=1e-4), x, y


def train_step(torch, model, forward, opt, x, y):
    def step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(forward(x), y)
        loss.backward()
        opt.step()
    return step


def round_robin(torch, steps: dict, rounds: int, counts: dict) -> dict:
    times = {kind: [] for kind in steps}
    for kind, step in steps.items():   # a warm-up window each
        window_ms(torch, step, counts[kind])
    for _ in range(rounds):
        for kind, step in steps.items():
            times[kind].append(window_ms(torch, step, counts[kind]))
    return times


def probe(rounds: int, target_ms: float, graph: bool) -> dict:
    import torch

    torch.manual_seed(0)
    built = {}
    for name, (widths, batch, optimizer) in MODELS.items():
        plain, copy = build(torch, widths, batch, optimizer), build(torch, widths, batch, optimizer)
        built[name] = {"plain": plain, "copy": copy, "eager_forward": copy[0].forward}
    before = {}
    for name, b in built.items():
        before[f"{name} | never graphed"] = train_step(torch, b["plain"][0], b["plain"][0], *b["plain"][1:])
        before[f"{name} | to be graphed"] = train_step(torch, b["copy"][0], b["copy"][0], *b["copy"][1:])
    counts = {}
    for kind, step in before.items():   # windows of about target_ms each
        for _ in range(3):
            step()
        counts[kind] = max(5, round(target_ms / window_ms(torch, step, 20)))
    times = {"before": round_robin(torch, before, rounds, counts)}
    after = {}
    for name, b in built.items():
        model, opt, x, y = b["copy"]
        if graph:
            torch.cuda.make_graphed_callables(model, (x,))
        after[f"{name} | never graphed"] = before[f"{name} | never graphed"]
        after[f"{name} | its eager path"] = train_step(torch, model, b["eager_forward"], opt, x, y)
        after[f"{name} | its graph"] = train_step(torch, model, model, opt, x, y)
        counts[f"{name} | its eager path"] = counts[f"{name} | its graph"] = counts[f"{name} | to be graphed"]
    times["after"] = round_robin(torch, after, rounds, counts)
    return {"graphed": graph, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "time": time.time(), "rounds": rounds, "counts": counts, "times": times}


def ratio(numerator: list, denominator: list) -> float:
    return statistics.median(numerator) / statistics.median(denominator)


def summary(paths) -> None:
    runs = [json.load(open(p)) for p in paths]
    print(f"{'model':22s} {'graphed':>8s} {'its eager, after/before':>24s} {'never graphed, after/before':>28s} "
          f"{'its eager / never graphed':>26s} {'graph / its eager before':>25s}")
    for run in runs:
        before, after = run["times"]["before"], run["times"]["after"]
        for name in MODELS:
            own = ratio(after[f"{name} | its eager path"], before[f"{name} | to be graphed"])
            other = ratio(after[f"{name} | never graphed"], before[f"{name} | never graphed"])
            local = ratio(after[f"{name} | its eager path"], after[f"{name} | never graphed"])
            speedup = ratio(before[f"{name} | to be graphed"], after[f"{name} | its graph"])
            print(f"{name:22s} {str(run['graphed']):>8s} {own:24.3f} {other:28.3f} {local:26.3f} {speedup:25.3f}"
                  f"   ({statistics.median(before[f'{name} | to be graphed']):.3f} ms before)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--summary", action="store_true", help="summarise the JSON files given")
    parser.add_argument("--no-graph", action="store_true", help="both phases without graphing (the drift alone)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--window-ms", type=float, default=50.0)
    args = parser.parse_args()
    if args.summary:
        summary(args.paths)
        return
    result = probe(args.rounds, args.window_ms, not args.no_graph)
    with open(args.paths[0], "w") as handle:
        json.dump(result, handle)
    summary(args.paths)


if __name__ == "__main__":
    main()
