"""Is a speedup timed in one process, eager and graphed windows alternating, steadier than one
timed as tune times it (eager in one process, the graph in another)? A launch-bound MLP step
runs eager and graphed (``full_iteration``: forward, backward and SGD step in one graph;
``fwd_bwd``: the model through ``make_graphed_callables``) in alternating windows; each
process prints its windows. ``summary`` compares, over the processes, the spread of

- the paired speedup: the median over one process's adjacent eager/graphed window pairs, and
- the cross-process speedup: one process's median eager window over another's median graphed
  window (what two separate processes give).

    python bench/paired_windows_probe.py run OUT.json [--pairs 30 --window 20]   (GPU, one process)
    python bench/paired_windows_probe.py summary OUT1.json OUT2.json ...
    python bench/paired_windows_probe.py contamination OUT.json   (GPU: does graphing slow eager?)
    python bench/paired_windows_probe.py contamination-full OUT.json   (the same for full_iteration)
    python bench/paired_windows_probe.py contamination-compile OUT.json   (the same for compile)
"""

import argparse
import json
import statistics
import time


def build(torch, width=256, depth=8, batch=64):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    x, y = torch.randn(batch, width, device="cuda"), torch.randn(batch, width, device="cuda")
    return model, x, y


def window_ms(torch, step, count):
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    begin.record()
    for _ in range(count):
        step()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / count


def windowed(torch, step):
    """A timer of ``count`` steps of ``step`` (ms/step), for round_robin."""
    return lambda count: window_ms(torch, step, count)


def round_robin(timers: dict, rounds: int, window: int) -> dict:
    """kind -> ms/step of each of ``rounds`` windows, the kinds' windows taken in turn (after
    three warm-up rounds), so that a host whose speed drifts moves every kind alike."""
    times = {kind: [] for kind in timers}
    for _ in range(3):
        for timer in timers.values():
            timer(window)
    for _ in range(rounds):
        for kind, timer in timers.items():
            times[kind].append(timer(window))
    return times


def probe(pairs: int, window: int) -> dict:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    out = {}
    # full_iteration
    model, x, y = build(torch)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def eager():
        opt.zero_grad(set_to_none=True)
        F.mse_loss(model(x), y).backward()
        opt.step()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            eager()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        F.mse_loss(model(x), y).backward()
        opt.step()
    # fwd_bwd
    model2, x2, y2 = build(torch)
    eager_forward = model2.forward   # make_graphed_callables replaces the module's forward
    graphed = torch.cuda.make_graphed_callables(model2, (x2,))

    def eager2():
        model2.zero_grad(set_to_none=True)
        F.mse_loss(eager_forward(x2), y2).backward()

    def graphed2():
        model2.zero_grad(set_to_none=True)
        F.mse_loss(graphed(x2), y2).backward()

    for name, e, g in (("full_iteration", eager, graph.replay), ("fwd_bwd", eager2, graphed2)):
        for _ in range(3):
            window_ms(torch, e, window)
            window_ms(torch, g, window)
        rows = [(window_ms(torch, e, window), window_ms(torch, g, window)) for _ in range(pairs)]
        out[name] = {"eager": [r[0] for r in rows], "graphed": [r[1] for r in rows]}
    out["gpu"] = torch.cuda.get_device_name()
    out["time"] = time.time()
    return out


def summary(paths) -> None:
    runs = [json.load(open(p)) for p in paths]
    for scope in ("full_iteration", "fwd_bwd"):
        paired = [statistics.median(e / g for e, g in zip(r[scope]["eager"], r[scope]["graphed"])) for r in runs]
        eager = [statistics.median(r[scope]["eager"]) for r in runs]
        graphed = [statistics.median(r[scope]["graphed"]) for r in runs]
        cross = [e / g for i, e in enumerate(eager) for j, g in enumerate(graphed) if i != j]
        centre = statistics.median(paired + cross)

        def within(values, centre=centre):
            return sum(abs(v / centre - 1) <= 0.2 for v in values), len(values)

        print(f"{scope}: eager windows {min(eager):.3f}-{max(eager):.3f} ms, graphed {min(graphed):.3f}-{max(graphed):.3f}")
        print(f"  paired (one process): {min(paired):.2f}x-{max(paired):.2f}x (max/min {max(paired) / min(paired):.2f}), "
              f"within 20 % of the common median {centre:.2f}x: {within(paired)[0]} of {within(paired)[1]}")
        print(f"  two processes:        {min(cross):.2f}x-{max(cross):.2f}x (max/min {max(cross) / min(cross):.2f}), "
              f"within 20 %: {within(cross)[0]} of {within(cross)[1]}")


def contamination(rounds: int, window: int) -> dict:
    """Does graphing a model with make_graphed_callables slow its own eager forward and backward
    (the eager windows of a paired timing)? Two copies of one MLP, one never graphed; their eager
    and graphed steps in windows round-robin. (Holding each parameter's AccumulateGrad node,
    made on the default stream, before graphing, so that the side stream of the warm-up would
    not own it, breaks the backward's capture: the default stream would wait on a capturing one.)"""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    plain, graphed = build(torch), build(torch)
    eager_forward = graphed[0].forward
    torch.cuda.make_graphed_callables(graphed[0], (graphed[1],))

    def step(model, forward, x, y):
        def run():
            model.zero_grad(set_to_none=True)
            F.mse_loss(forward(x), y).backward()
        return run

    kinds = {
        "never graphed, eager": step(plain[0], plain[0], plain[1], plain[2]),
        "graphed, its eager forward": step(graphed[0], eager_forward, graphed[1], graphed[2]),
        "graphed, the graph": step(graphed[0], graphed[0], graphed[1], graphed[2]),
    }
    return round_robin({kind: windowed(torch, run) for kind, run in kinds.items()}, rounds, window)

def contamination_full(rounds: int, window: int) -> dict:
    """The same question for a full-iteration graph, through the helper a full_iteration patch
    adds (tuner/templates.py) and the eager path that tune's paired timing takes through it
    (tuner/harness.py eager_call, with the optimizer made non-capturable for the window by
    optimizers_as_built, as the harness does; and without that, capturable as in the graph).
    Per optimizer (SGD, AdamW) and model size: a never-graphed copy with the optimizer as the
    user built it, the helper's eager steps, and its graph, windows round-robin."""
    import torch
    import torch.nn.functional as F

    from tuner.harness import eager_call, give_back_grads, optimizers_as_built, optimizers_capturable
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    helper_class = namespace["_CgFullIterationGraph"]
    torch.manual_seed(0)
    times = {}
    for width, depth, batch in ((256, 2, 64), (256, 8, 64), (256, 24, 64), (1024, 8, 256)):
        for name, make in (("SGD", lambda p: torch.optim.SGD(p, lr=1e-4, momentum=0.9)),
                           ("AdamW", lambda p: torch.optim.AdamW(p, lr=1e-4))):
            plain, graphed = build(torch, width, depth, batch), build(torch, width, depth, batch)
            plain_opt, graphed_opt = make(plain[0].parameters()), make(graphed[0].parameters())

            def train_step(model, opt):
                def step(x, y):
                    loss = F.mse_loss(model(x), y)
                    loss.backward()
                    opt.step()
                    return loss
                return step

            helper = helper_class(train_step(graphed[0], graphed_opt), [graphed_opt], [graphed[0]])
            helper(graphed[1], graphed[2])   # captured: its eager path is the one after capture
            plain_step = train_step(plain[0], plain_opt)

            def never_graphed(plain_step=plain_step, plain_opt=plain_opt, x=plain[1], y=plain[2]):
                plain_opt.zero_grad(set_to_none=True)
                plain_step(x, y)

            def helper_window(helper=helper, g=graphed, as_built=True):
                def timed_window(count):
                    changed = optimizers_as_built(helper.optimizers) if as_built else []
                    try:
                        return window_ms(torch, lambda: eager_call(helper, (g[1], g[2])), count)
                    finally:
                        optimizers_capturable(changed)
                        give_back_grads(helper)
                return timed_window

            kinds = {
                "never graphed, eager": lambda count, f=never_graphed: window_ms(torch, f, count),
                "graphed, its eager step (as tune times it)": helper_window(),
                "graphed, its eager step, capturable": helper_window(as_built=False),
                "graphed, the graph": lambda count, h=helper, g=graphed: window_ms(torch, lambda: h(g[1], g[2]), count),
            }
            times[f"{name} w{width} d{depth} b{batch}"] = round_robin(kinds, rounds, window)
    return times


def contamination_compile(rounds: int, window: int) -> dict:
    """The same question for ``torch.compile(mode="reduce-overhead")``, the compile scope as
    patch applies it (a compiled alias, a new step marked for its CUDA graphs each iteration):
    does compiling a model slow the eager steps of the same model, which the paired timing's
    eager windows run through the module the compiled alias wraps (tuner/harness.py)? Per
    model size: a never-compiled copy, the compiled model's own eager steps, and the compiled
    steps, an SGD step each, windows round-robin."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    times = {}
    for width, depth, batch in ((256, 2, 64), (256, 8, 64), (256, 24, 64), (1024, 8, 256)):
        plain, compiled = build(torch, width, depth, batch), build(torch, width, depth, batch)
        alias = torch.compile(compiled[0], mode="reduce-overhead")
        plain_opt = torch.optim.SGD(plain[0].parameters(), lr=1e-4, momentum=0.9)
        compiled_opt = torch.optim.SGD(compiled[0].parameters(), lr=1e-4, momentum=0.9)

        def step(forward, opt, x, y):
            def run():
                torch.compiler.cudagraph_mark_step_begin()
                opt.zero_grad(set_to_none=True)
                F.mse_loss(forward(x), y).backward()
                opt.step()
            return run

        kinds = {
            "never graphed, eager": step(plain[0], plain_opt, plain[1], plain[2]),
            "compiled, its module's eager step": step(compiled[0], compiled_opt, compiled[1], compiled[2]),
            "compiled, reduce-overhead": step(alias, compiled_opt, compiled[1], compiled[2]),
        }
        times[f"SGD w{width} d{depth} b{batch}"] = round_robin(
            {kind: windowed(torch, timed) for kind, timed in kinds.items()}, rounds, window)
    return times


def print_ratios(times: dict, title: str = "") -> None:
    base = times["never graphed, eager"]
    for kind, values in times.items():
        ratio = statistics.median(v / b for v, b in zip(values, base))
        print(f"{title}{kind:45s} median {statistics.median(values):.3f} ms/step, over never graphed {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("out")
    run.add_argument("--pairs", type=int, default=30)
    run.add_argument("--window", type=int, default=20)
    for name in ("contamination", "contamination-full", "contamination-compile"):
        rounds = sub.add_parser(name)
        rounds.add_argument("out")
        rounds.add_argument("--rounds", type=int, default=30)
        rounds.add_argument("--window", type=int, default=20)
    summ = sub.add_parser("summary")
    summ.add_argument("paths", nargs="+")
    args = parser.parse_args()
    if args.command == "run":
        with open(args.out, "w") as handle:
            json.dump(probe(args.pairs, args.window), handle)
    elif args.command == "contamination":
        times = contamination(args.rounds, args.window)
        print_ratios(times)
        with open(args.out, "w") as handle:
            json.dump(times, handle)
    elif args.command in ("contamination-full", "contamination-compile"):
        measure = contamination_full if args.command == "contamination-full" else contamination_compile
        times = measure(args.rounds, args.window)
        for key, by_kind in times.items():
            print_ratios(by_kind, f"{key:22s} ")
        with open(args.out, "w") as handle:
            json.dump(times, handle)
    else:
        summary(args.paths)


if __name__ == "__main__":
    main()

