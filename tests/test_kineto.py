"""torch.profiler (Kineto) traces captured on an H100, read into the Trace model and analysed;
every figure checked against plain Python over the trace's JSON, written here."""

import gzip
import json
import statistics

import numpy as np
import pytest

from advisor import ranges
from advisor.analysis import analyse
from advisor.errors import TraceError
from advisor.kineto import KinetoTrace, open_kineto
from advisor.predict import features_of, load_model, physical, predictions_for
from advisor.trace import OP_GRAPH, OP_KERNEL, OP_MEMCPY, is_fusible_kernel, open_trace
from conftest import TRACES, sql

KINETO = TRACES / "kineto"
WORKLOADS = ["mlp_launch", "mlp_graphed", "mlp_infer"]
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
CALL_CATEGORIES = ("cuda_runtime", "cuda_driver")


def kineto(name):
    return KINETO / f"{name}.json.gz"


def events(name):
    """The trace's complete events, as json reads them."""
    with gzip.open(kineto(name)) as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]


def graph_launches(ev):
    """Correlation ids of the cudaGraphLaunch calls."""
    return {e["args"]["correlation"] for e in ev if e["cat"] in CALL_CATEGORIES and e["name"] == "cudaGraphLaunch"}


def operations(ev):
    """The GPU operations as nsys's default graph mode records them: each kernel, copy and
    memset launched one by one as it is, and the nodes of each graph launch (same correlation
    id, same GPU) as one replay from the first node's start to the last node's end, of cat
    "graph". Dicts with cat, ts, dur and args.correlation, as Kineto's events."""
    launched = graph_launches(ev)
    out, replays = [], {}
    for e in ev:
        if e["cat"] not in GPU_CATEGORIES:
            continue
        corr = e["args"]["correlation"]
        if corr not in launched:
            out.append(e)
            continue
        key = (e["args"]["device"], corr)
        start, end = replays.get(key, (e["ts"], e["ts"] + e["dur"]))
        replays[key] = (min(start, e["ts"]), max(end, e["ts"] + e["dur"]))
    out += [{"cat": "graph", "ts": start, "dur": end - start, "args": {"correlation": corr}}
            for (_, corr), (start, end) in replays.items()]
    return out


def merged(intervals):
    """Union of (start, end) intervals, in plain Python."""
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def busy_within(union, a, b):
    return sum(max(0.0, min(end, b) - max(start, a)) for start, end in union)


def iterations_by_hand(name, range_name):
    """Per iteration range, in microseconds: the GPU window (first operation launched from it
    to the first of the next; the last one to its last operation's end), kernels starting in
    it and GPU busy time in it (a graph replay one operation, no kernel, busy from its start
    to its end, as nsys's graph mode has it: see operations). A call belongs to a range when it starts inside it, on any
    thread of the process (the iteration range spans autograd's thread)."""
    ev = events(name)
    calls = [e for e in ev if e["cat"] in CALL_CATEGORIES]
    gpu = operations(ev)
    iters = sorted((e for e in ev if e["cat"] == "user_annotation" and e["name"] == range_name),
                   key=lambda e: e["ts"])
    by_corr = {}
    for op in gpu:
        by_corr.setdefault(op["args"]["correlation"], []).append(op)
    firsts, lasts = [], []
    for it in iters:
        launched = [op for c in calls if it["ts"] <= c["ts"] <= it["ts"] + it["dur"]
                    for op in by_corr.get(c["args"]["correlation"], [])]
        firsts.append(min(op["ts"] for op in launched))
        lasts.append(max(op["ts"] + op["dur"] for op in launched))
    windows = list(zip(firsts, firsts[1:] + [lasts[-1]]))
    union = merged((op["ts"], op["ts"] + op["dur"]) for op in gpu)
    kernels = [sum(1 for op in gpu if op["cat"] == "kernel" and a <= op["ts"] < b) for a, b in windows]
    busy = [busy_within(union, a, b) for a, b in windows]
    return windows, kernels, busy, [sum(1 for op in gpu if a <= op["ts"] < b) for a, b in windows]


@pytest.mark.parametrize("name", WORKLOADS)
def test_every_gpu_operation_and_cuda_call_is_read(name):
    ev = events(name)
    trace = open_trace(kineto(name))
    assert isinstance(trace, KinetoTrace) and trace.backend == "torch.profiler"
    ops = trace.ops
    expected = operations(ev)
    assert int((ops["kind"] == OP_KERNEL).sum()) == sum(1 for e in expected if e["cat"] == "kernel")
    assert int((ops["kind"] == OP_MEMCPY).sum()) == sum(1 for e in expected if e["cat"] == "gpu_memcpy")
    assert int((ops["kind"] == OP_GRAPH).sum()) == sum(1 for e in expected if e["cat"] == "graph")
    assert len(ops) == len(expected)
    assert np.all(np.diff(ops["start"]) >= 0)
    # nanoseconds, to the nanosecond Kineto writes
    first = min(expected, key=lambda e: e["ts"])
    assert ops["start"][0] == round(first["ts"] * 1000)
    total_us = sum(e["dur"] for e in expected)
    assert (ops["end"] - ops["start"]).sum() / 1e3 == pytest.approx(total_us, abs=len(ops) * 2e-3)
    # every operation found its launching call by correlation id, in the profiled process
    cpu_pid = next(e["pid"] for e in ev if e["cat"] == "cuda_runtime")
    assert set(ops["pid"] >> 24) == {cpu_pid}
    launches = {e["args"]["correlation"] for e in ev if e["cat"] in CALL_CATEGORIES and "Launch" in e["name"]}
    assert set(ops["corr"][ops["kind"] == OP_KERNEL]) <= launches
    assert set(ops["corr"][ops["kind"] == OP_GRAPH]) == graph_launches(ev)
    # the ranges: every record_function range, on its own thread
    annotations = [e for e in ev if e["cat"] == "user_annotation"]
    assert len(trace.nvtx) == len(annotations)
    assert sorted(trace.nvtx_names) == sorted({e["name"] for e in annotations})
    assert set(trace.nvtx["tid"] & 0xFFFFFF) == {e["tid"] for e in annotations}


@pytest.mark.parametrize("name,range_name", [("mlp_launch", ranges.ITERATION), ("mlp_graphed", ranges.ITERATION),
                                             ("mlp_infer", ranges.FORWARD)])
def test_per_iteration_figures_match_plain_python(name, range_name):
    windows, kernels, busy, ops = iterations_by_hand(name, range_name)
    analysis = analyse(open_trace(kineto(name)))
    s = analysis.main.summary
    assert s.iterations == len(windows) == 20
    assert s.iteration_source == f"injected range {range_name!r}"
    rows = analysis.main.iterations
    for row, (a, b), k, u in zip(rows, windows, kernels, busy):
        assert row["kernels"] == k
        assert row["gpu_period_ms"] == pytest.approx((b - a) / 1e3, abs=1e-5)
        assert row["gpu_busy_ms"] == pytest.approx(u / 1e3, abs=k * 1e-6 + 1e-5)
    assert s.kernels_per_iteration == statistics.median(kernels)
    assert s.gpu_ops_per_iteration == statistics.median(ops)
    # each operation rounded to the nanosecond at both ends
    assert s.gpu_busy_ms_per_iteration == pytest.approx(statistics.median(busy) / 1e3, abs=max(ops) * 2e-6)
    assert s.gpu_period_ms == pytest.approx(statistics.median(b - a for a, b in windows) / 1e3, rel=1e-5)


def test_launch_figures_match_plain_python():
    """Launch call time and launch-to-start delay of the kernels launched one by one."""
    ev = events("mlp_launch")
    calls = {e["args"]["correlation"]: e for e in ev if e["cat"] in CALL_CATEGORIES}
    kernels = [e for e in ev if e["cat"] == "kernel"]
    api = [calls[k["args"]["correlation"]]["dur"] for k in kernels]
    delay = [k["ts"] - (calls[k["args"]["correlation"]]["ts"] + calls[k["args"]["correlation"]]["dur"])
             for k in kernels]
    s = analyse(open_trace(kineto("mlp_launch"))).main.summary
    assert s.launch_api_median_us == pytest.approx(statistics.median(api), abs=2e-3)
    assert s.launch_to_start_median_us == pytest.approx(statistics.median(delay), abs=2e-3)
    assert s.kernel_median_us == pytest.approx(statistics.median(k["dur"] for k in kernels), abs=2e-3)
    assert s.verdict == "launch-bound"


def test_backward_kernels_from_autograds_thread_count_in_the_iteration():
    """The backward range is a start/end range: autograd's thread launched its kernels."""
    ev = events("mlp_launch")
    main_tid = next(e["tid"] for e in ev if e["cat"] == "user_annotation")
    other = [e for e in ev if e["cat"] in CALL_CATEGORIES and "Launch" in e["name"] and e["tid"] != main_tid]
    assert other   # autograd's device thread launched kernels
    analysis = analyse(open_trace(kineto("mlp_launch")))
    backward = next(r for r in analysis.main.ranges if r.name == ranges.BACKWARD)
    spans = [e for e in ev if e["cat"] == "user_annotation" and e["name"] == ranges.BACKWARD]
    inside = [c for c in other if any(b["ts"] <= c["ts"] <= b["ts"] + b["dur"] for b in spans)]
    assert backward.calls == len(spans) == 20
    assert backward.kernels_per_call == pytest.approx(len(inside) / len(spans), abs=1)


def test_a_graph_replay_is_one_operation_as_in_nsys_graph_mode():
    """Kineto lists each kernel of a replayed graph with the cudaGraphLaunch's correlation id
    (node mode); they are read as one replay per launch, first node's start to last node's
    end, and the trace reads as nsys's default graph mode: no kernel in the replay, one GPU
    operation, the gaps between nodes busy."""
    ev = events("mlp_graphed")
    launched = graph_launches(ev)
    nodes = [e for e in ev if e["cat"] in GPU_CATEGORIES and e["args"]["correlation"] in launched]
    assert len(launched) == 20 and len(nodes) == 20 * 230
    assert {e["tid"] for e in nodes} == {7}   # every node on the launching stream here
    trace = open_trace(kineto("mlp_graphed"))
    assert trace.graph_mode == "graph" and trace.graph_nodes == len(nodes)
    replays = trace.ops[trace.ops["kind"] == OP_GRAPH]
    assert len(replays) == len(launched) and replays["in_graph"].all()
    assert not trace.ops["in_graph"][trace.ops["kind"] != OP_GRAPH].any()
    for corr, start, end in zip(replays["corr"], replays["start"], replays["end"]):
        mine = [e for e in nodes if e["args"]["correlation"] == corr]
        assert start == round(min(e["ts"] for e in mine) * 1000)
        assert end == pytest.approx(max(e["ts"] + e["dur"] for e in mine) * 1000, abs=1)
    s = analyse(trace).main.summary
    assert s.verdict == "graphed" and s.graphed_share > 0.99
    assert s.graph_launches_per_iteration == len(launched) / 20 == 1
    # nsys's graph mode on the same workload (launch_graphed: the same script and model, on
    # an H200) counts the same: no kernel, the replay and the two input copies per iteration
    nsys = analyse(open_trace(TRACES / "launch_graphed.sqlite")).main.summary
    assert (s.kernels_per_iteration, s.gpu_ops_per_iteration) == (nsys.kernels_per_iteration,
                                                                   nsys.gpu_ops_per_iteration) == (0, 3)
    assert s.gaps_per_iteration == nsys.gaps_per_iteration == 3
    assert "graph replays read from 4600 node records" in trace.profiler


def test_a_replay_over_several_streams_is_one_operation_per_gpu(tmp_path):
    """Nodes of one launch on two streams: one replay (CUPTI's graph trace has one record per
    launch, whatever streams its nodes use); on a second GPU: a replay there too, the analysis
    being per GPU. A kernel launched one by one stays a kernel."""
    def op(cat, ts, dur, corr, device=0, stream=7):
        return {"ph": "X", "cat": cat, "name": "k", "pid": device, "tid": stream, "ts": ts, "dur": dur,
                "args": {"correlation": corr, "device": device, "stream": stream}}
    def call(name, ts, corr):
        return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 9, "tid": 9, "ts": ts, "dur": 2.0,
                "args": {"correlation": corr}}
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        call("cudaLaunchKernel", 1.0, 1), call("cudaGraphLaunch", 5.0, 2),
        op("kernel", 4.0, 1.0, 1),
        op("kernel", 10.0, 2.0, 2, stream=7), op("kernel", 11.0, 5.0, 2, stream=21),
        op("gpu_memset", 17.0, 1.0, 2, stream=7), op("kernel", 12.0, 1.0, 2, device=1)]}))
    trace = open_trace(path)
    assert trace.graph_mode == "graph" and trace.graph_nodes == 4
    rows = [(int(o["device"]), int(o["kind"]), int(o["start"]), int(o["end"]), int(o["corr"])) for o in trace.ops]
    assert rows == [(0, OP_KERNEL, 4000, 5000, 1), (0, OP_GRAPH, 10000, 18000, 2), (1, OP_GRAPH, 12000, 13000, 2)]
    assert set(trace.ops["pid"] >> 24) == {9}


def busy_per_iteration(name):
    """GPU busy per iteration (ms), in plain Python: the union of the collapsed operations
    within each iteration's GPU window (see iterations_by_hand)."""
    _, _, busy, _ = iterations_by_hand(name, ranges.ITERATION)
    return [u / 1e3 for u in busy]


def test_graphed_busy_per_iteration_is_the_replays_as_in_nsys():
    """The graphed workload's GPU busy per iteration, read kernel by kernel before: 0.572 ms
    (the union of the nodes, the gaps between them idle), 5.4 % under nsys's 0.605 ms of the
    same run on the same H100 (bench/results/backends_h100.json, run 1, whose torch half this
    trace is). Read as replays it is 0.632 ms: the same meaning as nsys's, and 4.5 % above it,
    which is per-node tracing's own cost on the GPU (the replay takes 0.630 ms traced node by
    node against 0.602 ms as one record), not a reading of the trace. nsys's node mode shows
    the same on the H200 (launch_graphed_node against launch_graphed, the same workload:
    0.626 against 0.582 ms a replay, +7.6 %)."""
    by_hand = busy_per_iteration("mlp_graphed")
    s = analyse(open_trace(kineto("mlp_graphed"))).main.summary
    assert s.gpu_busy_ms_per_iteration == pytest.approx(statistics.median(by_hand), abs=2e-6)
    ev = events("mlp_graphed")
    union = merged((e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] in GPU_CATEGORIES)
    windows, _, _, _ = iterations_by_hand("mlp_graphed", ranges.ITERATION)
    union_of_nodes = [busy_within(union, a, b) / 1e3 for a, b in windows]
    assert statistics.median(union_of_nodes) == pytest.approx(0.5717, abs=1e-4)   # what was reported before
    assert statistics.median(by_hand) == pytest.approx(0.6318, abs=1e-4)
    recorded = json.loads((TRACES.parent / "bench" / "results" / "backends_h100.json").read_text())
    run1 = next(r for r in recorded["run1"] if r["workload"] == "mlp_graphed")
    # this trace (the analysis rounds each node to the nanosecond)
    assert run1["torch"]["busy_ms"] == pytest.approx(statistics.median(union_of_nodes), abs=1e-5)
    nsys_h100 = run1["nsys"]["busy_ms"]
    assert s.gpu_busy_ms_per_iteration / nsys_h100 == pytest.approx(1.045, abs=0.002)
    # utilization (busy / period) now agrees with nsys's within half a point: busy and period are
    # stretched alike, where the union of the nodes made 89 % of nsys's 98.7 %
    assert s.gpu_utilization == pytest.approx(run1["nsys"]["busy_ms"] / run1["nsys"]["period_ms"], abs=0.005)
    # against the committed nsys export of the same workload (launch_graphed, graph mode, an
    # H200: another GPU, so its replay is 0.582 ms): 8.3 % above it
    nsys_h200 = analyse(open_trace(TRACES / "launch_graphed.sqlite")).main.summary
    assert s.gpu_busy_ms_per_iteration / nsys_h200.gpu_busy_ms_per_iteration == pytest.approx(1.083, abs=0.002)
    assert s.gpu_utilization == pytest.approx(nsys_h200.gpu_utilization, abs=0.005)
    # the per-node stretch, in nsys's own node mode on the H200 (same script): the replay
    # spans of launch_graphed_node against launch_graphed's GRAPH_TRACE rows
    node_span = sql(TRACES / "launch_graphed_node.sqlite", """SELECT AVG(e - s) FROM (SELECT MIN(start) s,
                    MAX(end) e FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL GROUP BY correlationId)""")
    graph_span = sql(TRACES / "launch_graphed.sqlite", "SELECT AVG(end - start) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    assert node_span[0][0] / graph_span[0][0] == pytest.approx(1.076, abs=0.002)


def test_identity_processes_and_devices():
    with gzip.open(kineto("mlp_infer")) as handle:
        data = json.load(handle)
    trace = open_trace(kineto("mlp_infer"))
    cpu = {e["pid"] for e in data["traceEvents"] if e.get("name") == "process_labels" and e["args"]["labels"] == "CPU"}
    assert set(trace.processes) == cpu
    assert trace.devices == {d["id"]: d["name"] for d in data["deviceProperties"]}
    info = analyse(trace).to_dict()["trace"]
    assert info["backend"] == "torch.profiler" and info["nsys_version"] is None
    assert info["profiler"] == f"torch.profiler (Kineto trace schema {data['schemaVersion']}, CUPTI {data['cupti_version']})"


def test_inference_predictions_name_the_inference_scopes():
    analysis = analyse(open_trace(kineto("mlp_infer")))
    summary = json.loads((KINETO / "mlp_infer.summary.json").read_text())
    predictions = predictions_for(analysis, load_model(), {"untraced": summary["untraced"]})
    assert predictions["eager_source"] == "measured"
    assert {"forward", "compile"} <= set(predictions) and "full_iteration" not in predictions


def test_both_backends_agree_on_the_same_workload():
    """The same script and window under nsys (its export) and torch.profiler: the same
    iterations and kernels, GPU busy within the issue's 3 %."""
    nsys = analyse(open_trace(KINETO / "mlp_launch_nsys.sqlite")).main.summary
    torch = analyse(open_trace(kineto("mlp_launch"))).main.summary
    assert (torch.iterations, torch.kernels_per_iteration, torch.gpu_ops_per_iteration) == \
        (nsys.iterations, nsys.kernels_per_iteration, nsys.gpu_ops_per_iteration)
    assert torch.gpu_busy_ms_per_iteration == pytest.approx(nsys.gpu_busy_ms_per_iteration, rel=0.03)
    assert torch.verdict == nsys.verdict == "launch-bound"
    assert torch.phases.marked and nsys.phases.marked
    assert torch.phases.optimizer_ops == nsys.phases.optimizer_ops


def test_fusible_kernel_share_matches_plain_python_and_nsys():
    """The share of kernel time in the kernel families compile generates itself, from Kineto's
    full kernel names summed here in plain Python, and the same workload's nsys export (short
    names) reads the same."""
    kernels = [e for e in events("mlp_launch") if e["cat"] == "kernel"]
    share = sum(e["dur"] for e in kernels if is_fusible_kernel(e["name"])) / sum(e["dur"] for e in kernels)
    torch = analyse(open_trace(kineto("mlp_launch"))).main.summary.fusible_kernel_share
    nsys = analyse(open_trace(KINETO / "mlp_launch_nsys.sqlite")).main.summary.fusible_kernel_share
    assert torch == pytest.approx(share, rel=1e-6) and 0.1 < share < 0.5
    assert torch == pytest.approx(nsys, rel=0.03)


def outside_shares(named):
    """Per iteration (range start to the next one's start), the share of its host time
    outside the forward and backward ranges that start in it: what compile and fwd_bwd leave
    eager. ``named``: range name -> [(start, end)], any unit."""
    its = sorted(named[ranges.ITERATION])
    out = []
    for (a, _), (b, _) in zip(its, its[1:]):
        phases = sum(end - start for name in (ranges.FORWARD, ranges.BACKWARD) for start, end in named[name]
                     if a <= start < b)
        out.append((b - a - phases) / (b - a))
    return out


def test_same_baseline_predictions_differ_through_the_traced_host_split():
    """Issue #15's prediction check (same baseline, the nsys run's record): what differs
    between the two traces of mlp_launch is the traced split of host time. compile, fwd_bwd
    and submodule leave the host work outside the forward and backward eager, and take it as
    eager time x its share of the traced period; the torch trace's features with the nsys
    trace's split predict what the nsys trace predicts. That split differs by 1.3 points
    read as the model reads it (medians of period, forward and backward taken apart), by 0.4
    read per iteration, where either trace's own iterations spread over 1.5-2.4 points
    (interquartile): the difference is within each trace's noise; torch.profiler inflates
    the forward and backward no measurably more than the rest here."""
    record = json.loads((KINETO / "mlp_launch_nsys.cg-advise-run.json").read_text())
    model = load_model()
    summaries = {name: analyse(open_trace(path)).main.summary for name, path in
                 (("nsys", KINETO / "mlp_launch_nsys.sqlite"), ("torch", kineto("mlp_launch")))}
    features = {name: features_of(s, record) for name, s in summaries.items()}
    compile_ = {name: physical(f, "compile", model)["speedup"] for name, f in features.items()}
    # 2.8 % with the shipped model (4.1 % with the one before its graphed callables' host cost
    # was refit): within the 10 %, and all of it from the split, as follows
    assert 0 < compile_["torch"] / compile_["nsys"] - 1 < 0.10
    split = ("period_ms", "forward_ms", "backward_ms")
    with_nsys_split = {**features["torch"], **{k: features["nsys"][k] for k in split}}
    assert physical(with_nsys_split, "compile", model)["speedup"] == pytest.approx(compile_["nsys"], rel=2e-3)
    model_share = {name: (f["period_ms"] - f["forward_ms"] - f["backward_ms"]) / f["period_ms"]
                   for name, f in features.items()}
    assert model_share["nsys"] - model_share["torch"] == pytest.approx(0.013, abs=0.001)
    # per iteration, in plain Python over the JSON and the export
    named = {}
    for e in events("mlp_launch"):
        if e["cat"] == "user_annotation":
            named.setdefault(e["name"], []).append((e["ts"], e["ts"] + e["dur"]))
    torch_shares = outside_shares(named)
    named = {}
    for start, end, name in sql(KINETO / "mlp_launch_nsys.sqlite", """SELECT start, end, coalesce(text, (SELECT
                                value FROM StringIds WHERE id = textId)) FROM NVTX_EVENTS WHERE eventType IN (59, 60)"""):
        named.setdefault(name, []).append((start, end))
    nsys_shares = outside_shares(named)
    assert len(torch_shares) == len(nsys_shares) == 19
    gap = statistics.median(nsys_shares) - statistics.median(torch_shares)
    spreads = [np.subtract(*np.percentile(v, (75, 25))) for v in (nsys_shares, torch_shares)]
    assert gap == pytest.approx(0.004, abs=0.001) and min(spreads) > 0.014 and max(spreads) < 0.025
    assert abs(gap) < min(spreads) / 2


def test_zero_grad_between_iterations_matches_plain_python():
    """The zero_grad calls between iterations, which a full-iteration graph takes in: in a
    trace without the bootstrap's zero_grad ranges, torch.optim's own
    ``Optimizer.zero_grad#`` ranges that start between one iteration's end and the next
    one's start; the median over the gaps, by hand over the JSON."""
    ev = events("mlp_launch")
    iters = sorted((e for e in ev if e["cat"] == "user_annotation" and e["name"] == ranges.ITERATION),
                   key=lambda e: e["ts"])
    calls = [e for e in ev if e["cat"] == "user_annotation" and e["name"].startswith(ranges.TORCH_ZERO_GRAD_PREFIX)]
    per_gap = [sum(z["dur"] for z in calls if a["ts"] + a["dur"] <= z["ts"] < b["ts"]) for a, b in zip(iters, iters[1:])]
    assert len(per_gap) == 19 and min(per_gap) > 0
    phases = analyse(open_trace(kineto("mlp_launch"))).main.summary.phases
    assert phases.zero_grad_between_ms == pytest.approx(statistics.median(per_gap) / 1e3, rel=1e-3)
    assert 0 < phases.zero_grad_between_ms < phases.between_iterations_ms
    # a trace with no zero_grad range says so (None), not zero
    assert analyse(open_trace(kineto("mlp_infer"))).main.summary.phases.zero_grad_between_ms is None


def test_plain_json_reads_like_gzip(tmp_path):
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(kineto("mlp_infer").read_bytes()))
    a = analyse(open_trace(plain)).to_dict()
    b = analyse(open_trace(kineto("mlp_infer"))).to_dict()
    a["trace"].pop("path"), b["trace"].pop("path")
    assert a == b


@pytest.mark.parametrize("content,message", [
    (b"{\"traceEvents\": [", "{p}: not a readable torch.profiler trace (Expecting value); is it truncated?"),
    (b"{\"schemaVersion\": 1}", "{p}: a JSON file, but not a torch.profiler (Kineto) trace: it has no traceEvents list"),
    (gzip.compress(b"[1, 2]"), "{p}: a JSON file, but not a torch.profiler (Kineto) trace: it has no traceEvents list"),
    (gzip.compress(b"{\"traceEvents\": []}")[:12],
     "{p}: not a readable torch.profiler trace (Compressed file ended before the end-of-stream marker was "
     "reached); is it truncated?"),
])
def test_bad_json_is_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceError) as error:
        open_kineto(path)
    assert str(error.value) == message.format(p=path)


def test_a_cpu_only_trace_has_no_cuda_activity(tmp_path):
    """What torch.profiler writes without a GPU: CPU operators and ranges, no CUDA call."""
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 10.0, "dur": 5.0},
        {"ph": "X", "cat": "user_annotation", "name": ranges.ITERATION, "pid": 7, "tid": 7, "ts": 9.0, "dur": 8.0}]}))
    with pytest.raises(TraceError) as error:
        analyse(open_trace(path))
    assert str(error.value) == ("cpu.json: no CUDA activity in this torch.profiler trace (CPU operators only); "
                                "record it with ProfilerActivity.CUDA on a machine with an NVIDIA GPU")
