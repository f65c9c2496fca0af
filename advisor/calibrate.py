"""A few seconds of micro-benchmark that tell how this GPU, driver and torch launch work.

Run as ``python -m advisor.calibrate`` with the user's interpreter (its torch, its GPU): one
JSON object on stdout. The benefit model was fitted on other machines; these figures let it
scale what a graph costs to the one at hand instead of assuming the fitting GPU's constants:

- ``eager_launch_us``: host time of one small PyTorch op launched eagerly (dispatch plus
  ``cudaLaunchKernel``), the cost a graph removes;
- ``graph_node_us``: GPU time per node when a graph of such ops replays (the kernel and the
  gap between nodes), the cost a graph keeps;
- ``graph_launch_us``: host time of one ``replay()`` of a graph of that many nodes;
- ``graph_replay_batched_us``: host time of one ``replay()`` among a batch of them, recorded
  beside the helper's cost and not used: in place of ``graph_launch_us`` it brought 18 loops'
  full-iteration predictions on the lent H200 no closer to tune's (10 of 18 within 20 %
  against 11, bench/results/paired_timing/h200_recalibrated_2026-11-29/);
- ``helper_overhead_us``: host time of one call of the helper a full_iteration patch adds
  (tuner/templates.py) beyond its graph's ``replay()``: reading the batch's structure, copying
  two input tensors into the graph's buffers, the Python around them. The trace of an eager
  run cannot show it, and on a small step it sets the pace: a 16-operation step whose kernels
  take 0.025 ms ran graphed at 0.063 ms an iteration on the lent H200 (``eval_in_epoch``);
- ``capturable_step_us``: GPU time a full-iteration graph's capturable optimizer step adds over
  the eager step, for the optimizers the profiled run made capturable (``--capturable``): their
  class, tensor and element counts, each stepped on throwaway tensors of those sizes, once
  eagerly and once replayed as a graph with ``capturable=True``;
- ``callable_step_us`` and ``callable_eager_step_us``: host time of one training step (forward,
  loss, backward) of a small model (4 parameter tensors) wrapped by
  ``torch.cuda.make_graphed_callables``, as the fwd_bwd scope wraps the user's, and of the same
  step eagerly; ``callable_step_16_params_us`` and ``callable_eager_step_16_params_us`` the same
  of a model of 16, so that a cost per tensor reads off the two: recorded beside the model's
  fitted callable cost, not yet used (``graphed_callable``);
- ``step_edges_us``: host time between a plain loop's iterations, less its zero_grad calls,
  under the profile's own hooks (``step_edges``): the Python edges of the eager calls
  (the optimizer step's return, zero_grad's, the model call's dispatch) that the trace counts
  between iterations and a full-iteration graph does not run;
- the GPU's name, driver and the torch and CUDA versions, so a report says what it ran on.

The host costs are taken in ROUNDS rounds a little apart, each the median of its batches,
and the median round is kept. Calibrations of a single round (seven batches) read 44.6 and
16.2 us on an H100 host where the twelve others of that hour read 6.5-11.1, and the first
turned a fwd_bwd prediction of 2.3x into 0.87x (bench/results/backends_h100.md, run 4). Not the lowest round,
though contention only adds host time: the rounds of one calibration on that host swing
between two speeds (about 7.4 and 10.5 us), the model's constants were fitted on single
rounds taken at either, and the median of the rounds is what those rounds were. Every round
is kept in the record (``*_rounds``), so a report can show how steady the host was.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
import warnings

OPS = 400        # ops per timed batch: long enough to swamp timer cost, short enough for seconds
CALLS = 20       # helper calls per timed batch: few enough that the GPU never holds the host back
REPEATS = 7      # timed batches per round; a round reports their median
ROUNDS = 5       # rounds of both host costs, PAUSE_S apart; the median round is kept (odd: one middle)
PAUSE_S = 0.2


def _median(values) -> float:
    values = sorted(values)
    return values[len(values) // 2]


def typical(rounds) -> float:
    """The host cost of the median round (each round the median of its batches): one or two
    disturbed rounds do not move it."""
    return _median([_median(batch) for batch in rounds])


def driver_version() -> str:
    """The NVIDIA driver, from nvidia-smi when it is there ('' otherwise)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else ""


def calibrate(torch) -> dict:
    device = torch.device("cuda", torch.cuda.current_device())
    x = torch.zeros(1, device=device)

    def launch_ops():
        for _ in range(OPS):
            x.add_(1.0)

    for _ in range(3):             # warm the dispatcher, the allocator and the caching of the kernel
        launch_ops()
    torch.cuda.synchronize()

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        launch_ops()               # warm-up on the side stream, as torch.cuda.graph wants
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        launch_ops()
    graph.replay()
    torch.cuda.synchronize()

    eager_rounds, launch_rounds, node = [], [], []
    for round_ in range(ROUNDS):
        if round_:
            time.sleep(PAUSE_S)
        eager, launch = [], []
        for _ in range(REPEATS):
            start = time.perf_counter()
            launch_ops()
            eager.append((time.perf_counter() - start) / OPS * 1e6)
            torch.cuda.synchronize()
        for _ in range(REPEATS):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            start = time.perf_counter()
            graph.replay()
            launch.append((time.perf_counter() - start) * 1e6)
            end.record()
            end.synchronize()
            node.append(begin.elapsed_time(end) * 1e3 / OPS)
        eager_rounds.append(eager)
        launch_rounds.append(launch)
    try:
        replays = []   # the bare replays' host cost per call, in a batch: kept beside the cold launch above
        helper = kept("helper_overhead_us", helper_overhead(torch, device, replays=replays))
        helper["helper_overhead_us"] = max(helper["helper_overhead_us"], 0.0)   # a difference of two timings
        helper.update(kept("graph_replay_batched_us", replays))
    except Exception as error:  # noqa: BLE001 - the launch costs above stand without it
        helper = {"helper_overhead_error": f"{type(error).__name__}: {error}"[:300]}
    try:
        edges = kept("step_edges_us", step_edges(torch, device))
    except Exception as error:  # noqa: BLE001 - the figures above stand without it
        edges = {"step_edges_error": f"{type(error).__name__}: {error}"[:300]}
    callable_ = {}   # last of these: a figure the model does not use yet cannot cost the ones it does
    for layers, suffix in zip(CALLABLE_LAYERS, ("", f"_{2 * CALLABLE_LAYERS[1]}_params")):
        try:
            with warnings.catch_warnings():   # autograd's notice that the callable's warm-up ran on a side stream
                warnings.filterwarnings("ignore", message=".*AccumulateGrad.*", category=UserWarning)
                graphed, eager_steps = graphed_callable(torch, device, layers)
            callable_.update({**kept(f"callable_step{suffix}_us", graphed),
                              **kept(f"callable_eager_step{suffix}_us", eager_steps)})
        except Exception as error:  # noqa: BLE001 - the figures above stand without it
            callable_.setdefault("callable_step_error", f"{type(error).__name__}: {error}"[:300])
            break
        finally:
            # make_graphed_callables' graphs live in reference cycles: freed now, not by a
            # collection that fires during a later capture (--capturable's), which it would break
            gc.collect()
    properties = torch.cuda.get_device_properties(device)
    return {
        "schema": "cg-advise.calibration/1",
        "gpu": properties.name,
        "compute_capability": f"{properties.major}.{properties.minor}",
        "driver": driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "",
        **kept("eager_launch_us", eager_rounds),
        "graph_node_us": _median(node),    # GPU time: the host's contention does not reach it
        **kept("graph_launch_us", launch_rounds),
        "ops_per_sample": OPS,
        **helper,
        **callable_,
        **edges,
    }


def kept(key: str, rounds) -> dict:
    """A host cost as the calibration keeps it: the median round as ``key``, and every round's
    median as ``key_rounds``, so that a report can show how steady the host was."""
    return {key: typical(rounds), f"{key}_rounds": [round(_median(batch), 3) for batch in rounds]}


HELPER_INPUTS = 2   # input tensors the helper copies where its cost is timed (the model scales from these)


def helper_overhead(torch, device, inputs: int = HELPER_INPUTS, replays: list | None = None) -> list:
    """Rounds of the full-iteration helper's host cost per call beyond its replay: the helper
    around a small training step (a linear layer, its loss, backward and an SGD step) with an
    input and a target, timed in batches of CALLS calls, each against as many bare replays of
    the graph it captured. Where it cannot run (a capture this torch refuses), the calibration
    records why and the prediction goes without the figure, as for a record from before.
    ``inputs`` above 2 adds tensors to the layer's output, each one more input the helper
    copies (bench/host_read_probe.py: 23, 39 and 53 us for 2, 4 and 6 on the lent H100).
    ``replays``, where given, receives per round the bare replays' own host cost per call in
    those batches: a replay among replays, where ``graph_launch_us`` times one right after a
    sync (recorded for comparison, not yet used: a small step's graph measured on the lent H200
    below the cold launch and the helper together, bench/results/paired_timing/h200_step_edges_2026-11-29/)."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    model = torch.nn.Linear(8, 8).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    tensors = [torch.randn(4, 8, device=device) for _ in range(inputs)]

    def step(x, y, *extra):
        out = model(x)
        for t in extra:
            out = out + t
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        return loss

    helper = namespace["_CgFullIterationGraph"](step, [optimizer], [model])
    for _ in range(3):
        helper(*tensors)           # captures, then replays
    torch.cuda.synchronize()

    def per_call(call) -> float:
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        elapsed = (time.perf_counter() - start) / CALLS * 1e6
        torch.cuda.synchronize()
        return elapsed

    rounds = []
    for round_ in range(ROUNDS):
        if round_:
            time.sleep(PAUSE_S)
        helped, bare = [], []
        for _ in range(REPEATS):
            helped.append(per_call(lambda: helper(*tensors)))
            bare.append(per_call(helper.graph.replay))
        rounds.append([h - b for h, b in zip(helped, bare)])
        if replays is not None:
            replays.append(bare)
    return rounds


CALLABLE_LAYERS = (2, 8)   # linear layers of the callables timed: 4 and 16 parameter tensors, a cost per tensor between


def graphed_callable(torch, device, layers: int = 2) -> tuple:
    """Rounds of the host time per training step (forward, loss, backward) of a small model
    (``layers`` linear layers: two parameter tensors each) wrapped by ``torch.cuda.make_graphed_callables``
    as patch's fwd_bwd scope wraps the user's model, and rounds of the same step of the model
    run eagerly, each timed in batches of CALLS steps. The model charges a graphed callable a
    host cost fitted on the H100 dataset's host and scaled by the calibrated eager launch cost
    (``advisor.predict.callable_ms``, ``_host_speed``); on a machine of two H200s the unseen
    loops' fwd_bwd graphs of small steps ran at 0.57-0.80 of the time so predicted, the launch
    cost there only a little below the lone H200s' (a median 7.8 us against 7.9-10.5 per set,
    bench/results/paired_timing/h200_x2_current_2026-11-29/): a host's cost of the callable
    itself is what these figures hold, for a model to be fitted on once profiles carry them.
    The first profiles that did, on another pair and a lone H200, found the launch-scaled cost
    right (fwd_bwd within 20 % for 12 of 14 tunes) and the step at a median 62 and 43 launches
    (0.70 and 0.43 ms, a parameter tensor 25-31 us more, h200_callable_2026-11-29/): two hosts,
    too few to fit a model on.
    Each step takes the other of two input batches (a graphed callable copies a new batch into
    its buffers) and sets the gradients to None first, as a loop's zero_grad does."""
    import copy

    stack = [torch.nn.Linear(8, 8)]
    for _ in range(layers - 1):
        stack += [torch.nn.ReLU(), torch.nn.Linear(8, 8)]
    model = torch.nn.Sequential(*stack).to(device)
    xs, y = [torch.randn(4, 8, device=device) for _ in range(2)], torch.randn(4, 8, device=device)
    eager = copy.deepcopy(model)   # make_graphed_callables replaces the module's own forward
    graphed = torch.cuda.make_graphed_callables(model, (xs[0],))

    def per_step(forward) -> float:
        start = time.perf_counter()
        for call in range(CALLS):
            forward.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(forward(xs[call % 2]), y)
            loss.backward()
        elapsed = (time.perf_counter() - start) / CALLS * 1e6
        torch.cuda.synchronize()
        return elapsed

    for forward in (graphed, eager, graphed):   # warm both paths (autograd, the allocator)
        per_step(forward)
    graphed_rounds, eager_rounds = [], []
    for round_ in range(ROUNDS):
        if round_:
            time.sleep(PAUSE_S)
        graphed_steps, eager_steps = [], []
        for _ in range(REPEATS):
            graphed_steps.append(per_step(graphed))
            eager_steps.append(per_step(eager))
        graphed_rounds.append(graphed_steps)
        eager_rounds.append(eager_steps)
    return graphed_rounds, eager_rounds


EDGE_WARMUP = 40   # the plain loop's warm-up under the hooks: its second half, and as many iterations after, timed


def step_edges(torch, device) -> list:
    """Rounds of the host time from one iteration's end to the next one's start, less the
    zero_grad calls there, of a plain loop (zero_grad, a linear layer's forward and loss,
    backward, an SGD step) run under the profile's own hooks, untraced, as the bootstrap times
    a script's (``advisor.inject``). A loop with nothing of its own between its steps: what is
    left is the edges of the eager calls themselves (the optimizer step's return, zero_grad's
    call, the model call's dispatch to the first hook) and the hooks' own work, which the
    profile counts between iterations and a full-iteration graph does not run: 28-45 us on the
    lent H200 (bench/results/bootstrap_nvtx_h200_2026-11-29/), by which a small step's graph
    was predicted host-bound where it measured GPU-bound. Runs on a CPU too (the tests)."""
    from .inject import Injector, NvtxSink, Window, timed_from

    model = torch.nn.Linear(8, 8).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(4, 8, device=device), torch.randn(4, 8, device=device)
    # the warm-up (its second half timed), a window of one, and as many timed again after it
    steps = EDGE_WARMUP + 1 + (EDGE_WARMUP - timed_from(EDGE_WARMUP))
    rounds = []
    for round_ in range(ROUNDS):
        if round_:
            time.sleep(PAUSE_S)
        window = Window(warmup=EDGE_WARMUP, iterations=1, on_start=_nothing, on_stop=_nothing, on_exit=_nothing)
        injector = Injector(NvtxSink(), window)
        try:
            injector.install()
            for _ in range(steps):
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
        finally:
            injector.remove()
        if device.type == "cuda":
            torch.cuda.synchronize()
        edges = [(phases.get("between", 0.0) - phases.get("zero_grad_between", 0.0)) * 1e6
                 for phases in injector.timed_phases() if "between" in phases]
        if not edges:
            raise RuntimeError("the plain loop timed no iteration under the hooks")
        rounds.append(edges)
    return rounds


def _nothing() -> None:
    pass


SLEEP_CYCLES = 20_000_000   # torch.cuda._sleep's spin: ~10 ms on a 2 GHz GPU, longer than any step's launches
MAX_ELEMENTS = 1 << 25      # elements stepped at most (two optimizers' state of that size: ~1.5 GB); beyond, extrapolated


def optimizer_spec(text: str) -> tuple:
    """``CLASS:TENSORS:ELEMENTS[:GROUPS]`` (``--capturable``) as (class, tensors, elements, groups)."""
    name, tensors, elements, *rest = text.split(":")
    groups = int(rest[0]) if len(rest) == 1 else 1
    if len(rest) > 1 or not name.isidentifier() or int(tensors) < 1 or int(elements) < int(tensors) \
            or not 1 <= groups <= int(tensors):
        raise ValueError(f"not CLASS:TENSORS:ELEMENTS[:GROUPS]: {text}")
    return name, int(tensors), int(elements), groups


class NotAhead(RuntimeError):
    """The host could not queue the work while the GPU spun: a timing would hold its gaps."""


def gpu_us(torch, launch, cycles: int = SLEEP_CYCLES) -> float:
    """GPU time of what ``launch`` enqueues, launch gaps of the host taken out: the GPU spins
    first (``torch.cuda._sleep``) while the host queues the work behind it, so the work runs
    back to back as a graph's nodes do; the median of REPEATS. Where the spin ended before the
    host had queued it all (a step of thousands of tensors, or one that syncs, as ASGD's eager
    step does), it spins four times longer, twice at most, then gives up (``NotAhead``)."""
    for _ in range(3):
        times, ahead = [], True
        for _ in range(REPEATS):
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(cycles)
            begin.record()
            launch()
            end.record()
            ahead = ahead and not begin.query()   # the GPU still spinning once all was queued
            end.synchronize()
            times.append(begin.elapsed_time(end) * 1e3)
        if ahead:
            return _median(times)
        cycles *= 4
    raise NotAhead("the host could not queue the step ahead of the GPU")


def step_extra_us(torch, device, name: str, tensors: int, elements: int, groups: int = 1) -> dict:
    """One optimizer's capturable cost: ``tensors`` float32 parameters holding ``elements`` in
    all, in ``groups`` parameter groups, stepped by torch.optim.``name`` with the class's
    defaults, eagerly and as a captured graph with ``capturable=True`` (step counts and bias
    corrections on the GPU: kernels, some over all of the state, that the eager step never
    launches). ``extra_us``: the graph's GPU time over the eager step's, both back to back
    (``gpu_us``)."""
    cls = getattr(torch.optim, name)
    per = max(elements // tensors, 1)
    sizes = [per + elements - per * tensors] + [per] * (tensors - 1)

    def make(capturable: bool):
        params = [torch.zeros(size, device=device, requires_grad=True) for size in sizes]
        for p in params:
            p.grad = torch.full_like(p, 1e-3)
        optimizer = cls([{"params": params[k::groups]} for k in range(groups)], capturable=capturable)
        for _ in range(3):   # the state exists, the first steps' branches are past
            optimizer.step()
        return optimizer

    eager, graphed = make(False), make(True)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        graphed.step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.step()
    eager.step()
    graph.replay()
    torch.cuda.synchronize()
    eager_us, graph_us = gpu_us(torch, eager.step), gpu_us(torch, graph.replay)
    return {"class": name, "tensors": tensors, "elements": elements, "groups": groups, "eager_us": round(eager_us, 3),
            "graphed_us": round(graph_us, 3), "extra_us": round(graph_us - eager_us, 3)}


def summed_extra_us(steps) -> float:
    """``capturable_step_us`` of measured steps: their extras, a negative one (a capturable
    graph faster than the eager step, Adadelta's) counted as 0."""
    return round(sum(max(s["extra_us"], 0.0) for s in steps), 3)


def capturable_steps(torch, device, optimizers) -> dict:
    """``capturable_step_us`` (the sum over ``optimizers`` of each one's extra, at least 0) and
    each one's figures; an optimizer beyond MAX_ELEMENTS is measured at it and at half of it
    and its extra extended along that line (its ``eager_us`` and ``graphed_us`` those at
    ``measured_elements``). A class torch.optim does not have, one that refuses the flag or the
    capture, or a step the host cannot queue ahead of the GPU leaves ``capturable_step_us`` out
    and says why: the prediction then uses the fitted cost, as for a record from before."""
    steps = []
    try:
        for name, tensors, elements, groups in optimizers:
            if elements <= MAX_ELEMENTS:
                steps.append(step_extra_us(torch, device, name, tensors, elements, groups))
                continue
            full = step_extra_us(torch, device, name, tensors, MAX_ELEMENTS, groups)
            torch.cuda.empty_cache()
            half = step_extra_us(torch, device, name, tensors, MAX_ELEMENTS // 2, groups)
            slope = (full["extra_us"] - half["extra_us"]) / (MAX_ELEMENTS - MAX_ELEMENTS // 2)
            steps.append({**full, "elements": elements, "measured_elements": MAX_ELEMENTS,
                          "extra_us": round(full["extra_us"] + slope * (elements - MAX_ELEMENTS), 3)})
            torch.cuda.empty_cache()
        return {"capturable_step_us": summed_extra_us(steps), "capturable_steps": steps}
    except Exception as error:  # noqa: BLE001 - the launch costs stand without it
        return {"capturable_steps": steps, "capturable_error": f"{type(error).__name__}: {error}"[:300]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m advisor.calibrate",
                                     description="How this GPU, driver and torch launch work: one JSON object.")
    parser.add_argument("--capturable", action="append", default=[], type=optimizer_spec,
                        metavar="CLASS:TENSORS:ELEMENTS[:GROUPS]",
                        help="an optimizer a full-iteration graph makes capturable (repeatable)")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print(json.dumps({"error": "torch is not installed"}))
        return 1
    if not torch.cuda.is_available():
        print(json.dumps({"error": "no CUDA device"}))
        return 1
    calibration = calibrate(torch)
    if args.capturable:   # capturable_steps says why where it cannot measure: the figures above stand
        calibration.update(capturable_steps(torch, torch.device("cuda", torch.cuda.current_device()), args.capturable))
    print(json.dumps(calibration))
    return 0


if __name__ == "__main__":
    sys.exit(main())
