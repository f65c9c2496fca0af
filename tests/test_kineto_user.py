"""torch.profiler traces taken as its documentation shows, not by cg-advise (issue #15: "a
torch.profiler trace of your own"): a schedule (wait 10, warm-up 5, active 10), prof.step()
after each step, which wraps it in a ``ProfilerStep#N`` range, and tensorboard_trace_handler's
gzipped file; the same loop profiled by cg-advise's nsys backend beside them, on the same H100
(bench/gpu_user_traces.sh, sample_traces/MANIFEST.md). Every figure is checked against plain
Python over the JSON, or plain SQL over the nsys export, written here."""

import gzip
import json
import statistics

import pytest

from advisor import profile as prof
from advisor.analysis import analyse
from advisor.kineto import KinetoTrace
from advisor.predict import features_of, for_backend, load_model, predict_scope
from advisor.trace import OP_GRAPH, OP_KERNEL, OP_MEMCPY, OP_MEMSET, open_trace
from conftest import sql
from test_cli_kineto import invoke
from test_kineto import CALL_CATEGORIES, GPU_CATEGORIES, KINETO, busy_within, graph_launches, merged, operations

USER = ["user_eager", "user_eager_full", "user_graphed"]
STEP = "ProfilerStep#"
ACTIVE_STEPS = [f"{STEP}{n}" for n in range(15, 25)]   # the schedule's: 10 waited, 5 warmed up, 10 recorded
KINDS = {"kernel": OP_KERNEL, "gpu_memcpy": OP_MEMCPY, "gpu_memset": OP_MEMSET, "graph": OP_GRAPH}
NSYS_TABLES = {"kernel": "KERNEL", "gpu_memcpy": "MEMCPY", "gpu_memset": "MEMSET", "graph": "GRAPH_TRACE"}


def user_trace(name):
    return KINETO / f"{name}.pt.trace.json.gz"


def nsys_export(name):
    return KINETO / f"{name}_nsys.sqlite"


def trace_json(name):
    with gzip.open(user_trace(name)) as handle:
        return json.load(handle)


def user_events(name):
    """The trace's complete events (test_kineto.events reads the files cg-advise writes)."""
    return [e for e in trace_json(name)["traceEvents"] if e.get("ph") == "X"]


def per_iteration(iterations, calls, gpu, per_ms):
    """As test_kineto.iterations_by_hand, on plain tuples so that both backends go through it:
    ``iterations`` [(start, end)], ``calls`` [(start, correlation)] on any thread,
    ``gpu`` [(kind, start, end, correlation)], a graph replay one operation of kind "graph";
    ``per_ms`` time units per millisecond. Per iteration: the GPU window (first operation
    launched from it to the first of the next; the last one to its last operation's end) in
    ms, the kernels starting in it, GPU busy in it (ms) and the operations starting in it."""
    by_corr = {}
    for op in gpu:
        by_corr.setdefault(op[3], []).append(op)
    firsts, lasts = [], []
    for a, b in sorted(iterations):
        launched = [op for start, corr in calls if a <= start <= b for op in by_corr.get(corr, [])]
        firsts.append(min(op[1] for op in launched))
        lasts.append(max(op[2] for op in launched))
    windows = list(zip(firsts, firsts[1:] + [lasts[-1]]))
    union = merged((op[1], op[2]) for op in gpu)
    return ([(a / per_ms, b / per_ms) for a, b in windows],
            [sum(1 for op in gpu if op[0] == "kernel" and a <= op[1] < b) for a, b in windows],
            [busy_within(union, a, b) / per_ms for a, b in windows],
            [sum(1 for op in gpu if a <= op[1] < b) for a, b in windows])


def kineto_by_hand(name):
    """Per ProfilerStep range, in plain Python over the JSON (microseconds)."""
    ev = user_events(name)
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["cat"] == "user_annotation" and e["name"].startswith(STEP)]
    calls = [(e["ts"], e["args"]["correlation"]) for e in ev if e["cat"] in CALL_CATEGORIES]
    gpu = [(op["cat"], op["ts"], op["ts"] + op["dur"], op["args"]["correlation"]) for op in operations(ev)]
    return per_iteration(steps, calls, gpu, per_ms=1e3)


def nsys_by_hand(name):
    """Per cg-advise:iteration range, in plain SQL over the export (nanoseconds); the export
    holds one process, so every CUDA call is the loop's."""
    path = nsys_export(name)
    tables = {table for (table,) in sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    gpu = [(kind, start, end, corr) for kind, table in NSYS_TABLES.items()
           if f"CUPTI_ACTIVITY_KIND_{table}" in tables
           for start, end, corr in sql(path, f"SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_{table}")]
    calls = sql(path, "SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    iterations = sql(path, """SELECT n.start, n.end FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
                              WHERE coalesce(n.text, s.value) = 'cg-advise:iteration'""")
    assert len(sql(path, "SELECT DISTINCT globalTid >> 24 FROM CUPTI_ACTIVITY_KIND_RUNTIME")) == 1
    return per_iteration(iterations, calls, gpu, per_ms=1e6)


@pytest.mark.parametrize("name", USER)
def test_every_gpu_operation_and_range_is_read(name):
    """Whatever else the file holds (the GPU-side copies of the ProfilerStep ranges, cat
    gpu_user_annotation; flow events; the profiler's own span with string ids), the reader
    takes the CUDA activity and the CPU-side ranges, and nothing more."""
    ev = user_events(name)
    trace = open_trace(user_trace(name))
    assert isinstance(trace, KinetoTrace) and trace.backend == "torch.profiler"
    expected = operations(ev)
    for cat, kind in KINDS.items():
        assert int((trace.ops["kind"] == kind).sum()) == sum(1 for e in expected if e["cat"] == cat)
    assert len(trace.ops) == len(expected)
    launched = graph_launches(ev)
    nodes = sum(1 for e in ev if e["cat"] in GPU_CATEGORIES and e["args"]["correlation"] in launched)
    assert (trace.graph_mode, trace.graph_nodes) == (("graph", nodes) if launched else ("none", 0))
    annotations = [e for e in ev if e["cat"] == "user_annotation"]
    assert any(e["cat"] == "gpu_user_annotation" and e["name"].startswith(STEP) for e in ev)
    assert len(trace.nvtx) == len(annotations)
    assert sorted(trace.nvtx_names) == sorted({e["name"] for e in annotations})


def test_shapes_memory_and_stacks_are_read_past():
    """record_shapes, profile_memory and with_stack add python_function ranges (on the steps'
    thread, <module> and main around all of them), [memory] instant events and shape arguments:
    none of it is CUDA activity or a record_function range, so the full trace reads as the
    plain one (were the stack read as ranges, <module> would hide the steps)."""
    plain, full = user_events("user_eager"), user_events("user_eager_full")
    events = trace_json("user_eager_full")["traceEvents"]
    assert {e.get("cat") for e in events} - {e.get("cat") for e in trace_json("user_eager")["traceEvents"]} \
        == {"python_function", "cpu_instant_event"}
    assert any("Input Dims" in e.get("args", {}) for e in full)
    a, b = open_trace(user_trace("user_eager")), open_trace(user_trace("user_eager_full"))
    for cat in GPU_CATEGORIES + CALL_CATEGORIES + ("user_annotation",):
        assert sum(1 for e in plain if e["cat"] == cat) == sum(1 for e in full if e["cat"] == cat)
    assert (len(a.ops), len(a.runtime), len(a.nvtx), a.nvtx_names) == \
        (len(b.ops), len(b.runtime), len(b.nvtx), b.nvtx_names)


@pytest.mark.parametrize("name", USER)
def test_iterations_are_the_profiler_steps(name):
    ev = user_events(name)
    steps = sorted((e for e in ev if e["cat"] == "user_annotation" and e["name"].startswith(STEP)),
                   key=lambda e: e["ts"])
    assert [e["name"] for e in steps] == ACTIVE_STEPS
    windows, kernels, busy, ops = kineto_by_hand(name)
    analysis = analyse(open_trace(user_trace(name)))
    s = analysis.main.summary
    assert s.iterations == len(windows) == 10
    # no cg-advise range: the repeated top-level range, its step numbers masked
    assert s.iteration_source == f"repeated top-level range {STEP + '#'!r}"
    rows = analysis.main.iterations
    # in nanoseconds, through a float of milliseconds near 4.6e9: within 2 ns
    assert [row["gpu_start_ns"] for row in rows] == pytest.approx([a * 1e6 for a, _ in windows], abs=2)
    for row, (a, b), k, u in zip(rows, windows, kernels, busy):
        assert row["kernels"] == k
        assert row["gpu_period_ms"] == pytest.approx(b - a, abs=1e-5)
        assert row["gpu_busy_ms"] == pytest.approx(u, abs=max(ops) * 2e-6)
    assert s.kernels_per_iteration == statistics.median(kernels)
    assert s.gpu_ops_per_iteration == statistics.median(ops)
    assert s.gpu_busy_ms_per_iteration == pytest.approx(statistics.median(busy), abs=max(ops) * 2e-6)
    assert s.gpu_period_ms == pytest.approx(statistics.median(b - a for a, b in windows), rel=1e-5)


def test_a_step_covers_the_backward_launched_from_autograds_thread():
    """prof.step()'s range is opened on the loop's thread, and autograd's thread launches the
    backward: taken as its own thread's range only, a step would launch 58 % of the GPU time,
    near the 50 % under which a repeated range is no iteration. Read across threads, 100 %."""
    ev = user_events("user_eager")
    steps = [e for e in ev if e["cat"] == "user_annotation" and e["name"].startswith(STEP)]
    loop_thread = {e["tid"] for e in steps}
    calls = {e["args"]["correlation"]: e for e in ev if e["cat"] in CALL_CATEGORIES}
    gpu = [e for e in ev if e["cat"] in GPU_CATEGORIES]

    def share(threads):
        inside = [e for e in gpu if any(s["ts"] <= calls[e["args"]["correlation"]]["ts"] <= s["ts"] + s["dur"]
                                        and (threads is None or calls[e["args"]["correlation"]]["tid"] in threads)
                                        for s in steps)]
        return sum(e["dur"] for e in inside) / sum(e["dur"] for e in gpu)

    assert len(loop_thread) == 1 and share(loop_thread) < 0.7
    s = analyse(open_trace(user_trace("user_eager"))).main.summary
    assert [c["range"] for c in s.iteration_candidates] == [STEP + "#"]
    assert s.iteration_candidates[0]["gpu_share"] == pytest.approx(share(None), abs=1e-6) == 1


def test_shapes_memory_and_stacks_change_no_gpu_figure():
    """The same loop with record_shapes, profile_memory and with_stack: the same 37 kernels per
    step and the same GPU busy (0.1242 ms both, medians); only the host slows down (period
    3.04 ms plain, 3.61 ms full: the stacks and memory events are recorded on the host)."""
    _, plain_kernels, plain_busy, _ = kineto_by_hand("user_eager")
    _, full_kernels, full_busy, _ = kineto_by_hand("user_eager_full")
    assert set(plain_kernels) == set(full_kernels) == {37}
    middle = statistics.median(plain_busy)
    assert all(u == pytest.approx(middle, rel=0.03) for u in full_busy)
    plain = analyse(open_trace(user_trace("user_eager"))).main.summary
    full = analyse(open_trace(user_trace("user_eager_full"))).main.summary
    assert plain.kernels_per_iteration == full.kernels_per_iteration == 37
    assert full.gpu_busy_ms_per_iteration == pytest.approx(plain.gpu_busy_ms_per_iteration, rel=0.03)


def test_nsys_exports_match_plain_sql():
    """The nsys side of the comparison is checked as the Kineto side is: its figures from plain
    SQL, its window the run record's (50 warm-up, 20 recorded)."""
    for name in ("user_eager", "user_graphed"):
        windows, kernels, busy, ops = nsys_by_hand(name)
        record = json.loads((KINETO / f"{name}_nsys.cg-advise-run.json").read_text())
        s = analyse(open_trace(nsys_export(name))).main.summary
        assert s.iterations == len(windows) == record["window"]["iterations"] == 20
        assert s.kernels_per_iteration == statistics.median(kernels)
        assert s.gpu_ops_per_iteration == statistics.median(ops)
        assert s.gpu_busy_ms_per_iteration == pytest.approx(statistics.median(busy), abs=1e-6)
        assert s.gpu_period_ms == pytest.approx(statistics.median(b - a for a, b in windows), abs=1e-6)


def test_the_eager_loop_reads_as_under_nsys():
    """The same loop under torch.profiler (the user's ten steps) and under cg-advise's nsys
    backend (its twenty): 37 kernels and one memset every step in both; GPU busy per step
    within the issue's 3 % (measured: 0.1242 ms median in both, every step 0.1237-0.1246 ms in
    either)."""
    _, torch_kernels, torch_busy, torch_ops = kineto_by_hand("user_eager")
    _, nsys_kernels, nsys_busy, nsys_ops = nsys_by_hand("user_eager")
    assert set(torch_kernels) == set(nsys_kernels) == {37}
    assert set(torch_ops) == set(nsys_ops) == {38}
    middle = statistics.median(nsys_busy)
    assert all(u == pytest.approx(middle, rel=0.03) for u in torch_busy)
    torch = analyse(open_trace(user_trace("user_eager"))).main.summary
    nsys = analyse(open_trace(nsys_export("user_eager"))).main.summary
    assert (torch.kernels_per_iteration, torch.gpu_ops_per_iteration) == \
        (nsys.kernels_per_iteration, nsys.gpu_ops_per_iteration)
    assert torch.gpu_busy_ms_per_iteration == pytest.approx(nsys.gpu_busy_ms_per_iteration, rel=0.03)
    assert torch.verdict == nsys.verdict == "launch-bound"


def test_the_graphed_loop_is_one_replay_per_step_in_both():
    """The whole step as one CUDA graph: Kineto lists its 38 nodes (37 kernels, a memset) with
    the cudaGraphLaunch's correlation, read as one replay; nsys's graph mode records one. Per
    step: one operation, no kernel, in both. Kineto's replay is longer: tracing each node
    stretches it on the GPU (advisor/kineto.py's docstring), which no reading undoes. Measured
    here: busy 0.1333 ms (median; every step 0.1330-0.1339 ms but the first, 0.146 ms) against
    nsys's 0.1231 ms (0.1226-0.1235 ms): +8.3 %, 10 us over 38 nodes, where mlp_graphed's
    230-node replay was +4.5 % (28 us; test_kineto). The bar allows that stretch, not more."""
    _, torch_kernels, torch_busy, torch_ops = kineto_by_hand("user_graphed")
    _, nsys_kernels, nsys_busy, nsys_ops = nsys_by_hand("user_graphed")
    assert set(torch_kernels) == set(nsys_kernels) == {0}
    assert set(torch_ops) == set(nsys_ops) == {1}
    ev = user_events("user_graphed")
    assert sum(1 for e in ev if e["cat"] in GPU_CATEGORIES) == 10 * 38 and len(graph_launches(ev)) == 10
    stretch = statistics.median(torch_busy) / statistics.median(nsys_busy) - 1
    assert 0 < stretch < 0.15
    torch = analyse(open_trace(user_trace("user_graphed"))).main.summary
    nsys = analyse(open_trace(nsys_export("user_graphed"))).main.summary
    assert (torch.kernels_per_iteration, torch.gpu_ops_per_iteration) == \
        (nsys.kernels_per_iteration, nsys.gpu_ops_per_iteration) == (0, 1)
    assert 0 < torch.gpu_busy_ms_per_iteration / nsys.gpu_busy_ms_per_iteration - 1 < 0.15
    assert torch.verdict == nsys.verdict == "graphed"


def test_analyze_a_users_trace():
    """`analyze` on the file tensorboard_trace_handler wrote, as a user runs it: launch-bound
    (a finding, exit 1), the backend named, and, with no run record beside it, the eager time
    estimated and said to be. The estimate (traced period less torch.profiler's cost per GPU
    operation) lands near what cg-advise's nsys run of the same loop measured untraced: 1.861
    against 1.929 ms (-3.5 %)."""
    assert not prof.run_record_path(user_trace("user_eager")).exists()
    code, out, err = invoke("analyze", user_trace("user_eager"), "--json")
    assert (code, err) == (1, "")
    data = json.loads(out)
    assert data["trace"]["backend"] == "torch.profiler"
    s, predictions = data["summary"], data["predictions"]
    steps = [e for e in user_events("user_eager") if e["cat"] == "user_annotation" and e["name"].startswith(STEP)]
    assert s["iterations"] == len(steps) and s["verdict"] == "launch-bound"
    assert predictions["eager_source"] == "estimated"
    assert "eager time estimated from the traced run" in predictions["advice"]
    record = json.loads((KINETO / "user_eager_nsys.cg-advise-run.json").read_text())
    assert predictions["eager_ms"] == pytest.approx(record["untraced"]["gpu_ms_per_iteration"], rel=0.10)


def test_a_graphed_users_trace_gets_no_prediction():
    code, out, err = invoke("analyze", user_trace("user_graphed"), "--json")
    assert (code, err) == (0, "")   # graphed: nothing to fix
    data = json.loads(out)
    assert data["summary"]["verdict"] == "graphed"
    assert data["predictions"] == {"note": "this run already executes in CUDA graphs: profile the eager loop to predict"}


def test_torch_optims_own_ranges_are_the_optimizer_phase():
    """A user's trace has no cg-advise phase ranges, but torch.optim wraps every step and
    zero_grad in a record_function range of its own: their time per step (plain Python: the
    ranges that start in each ProfilerStep, median) is host work that fwd_bwd and compile leave
    eager. Without it those scopes were predicted as if the optimizer's host time vanished:
    fwd_bwd 3.15x, where the nsys run of the same loop (phases marked by the bootstrap) predicts
    1.68x; with it 2.27x, still high (the loss and backward's own host time are not seen)."""
    ev = user_events("user_eager")
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
                   if e["cat"] == "user_annotation" and e["name"].startswith(STEP))
    optimizer = [e for e in ev if e["cat"] == "user_annotation"
                 and e["name"].startswith(("Optimizer.step#", "Optimizer.zero_grad#"))]
    per_step = _range_time_per_step(ev, steps, ("Optimizer.step#", "Optimizer.zero_grad#"))
    assert all(t > 0 for t in per_step)
    code, out, _ = invoke("analyze", user_trace("user_eager"), "--json")
    data = json.loads(out)
    phases = data["summary"]["phases"]
    assert not phases["marked"]
    assert phases["optimizer_ms"] == pytest.approx(statistics.median(per_step) / 1e3, abs=2e-6)
    # SGD with momentum, foreach: the kernels launched inside the step ranges, by correlation
    launched = {e["args"]["correlation"] for e in ev if e["cat"] in CALL_CATEGORIES for s in optimizer
                if s["name"].startswith("Optimizer.step#") and s["tid"] == e["tid"]
                and s["ts"] <= e["ts"] <= s["ts"] + s["dur"]}
    kernels = sum(1 for e in ev if e["cat"] in GPU_CATEGORIES and e["args"]["correlation"] in launched)
    assert phases["optimizer_ops"] == kernels / len(steps)
    code, out, _ = invoke("analyze", nsys_export("user_eager"), "--json")
    nsys = json.loads(out)["predictions"]
    assert nsys["eager_source"] == "measured"
    fwd_bwd = data["predictions"]["fwd_bwd"]["speedup"]
    model = for_backend(load_model(), "torch.profiler")   # the model analyze reads a Kineto trace with
    f = features_of(analyse(open_trace(user_trace("user_eager"))).main.summary)
    # the model's whole prediction (physics, and the residual regression where the model keeps one)
    without = predict_scope(model, {**f, "optimizer_ms": 0.0, "optimizer_ops": 0.0}, "fwd_bwd")
    assert abs(fwd_bwd - nsys["fwd_bwd"]["speedup"]) < abs(without - nsys["fwd_bwd"]["speedup"])
    assert predict_scope(model, f, "fwd_bwd") == pytest.approx(fwd_bwd, rel=1e-9)
    assert nsys["fwd_bwd"]["speedup"] < fwd_bwd < without


def _range_time_per_step(ev, steps, prefixes):
    """Per step (start, end): the time of the ranges named with ``prefixes`` that start in it."""
    chosen = [e for e in ev if e["cat"] == "user_annotation" and e["name"].startswith(prefixes)]
    return [sum(e["dur"] for e in chosen if a <= e["ts"] < b) for a, b in steps]


def test_torch_optims_ranges_after_an_iterations_end_are_not_counted_twice(tmp_path):
    """Where the user's iteration range ends before the optimizer step (a range around forward
    and backward only), the step's host time is already in the time between iterations: the
    optimizer phase keeps only the ranges inside the iterations (here zero_grad), so the host
    work left eager is not counted twice. Built from the eager trace, each ProfilerStep cut to
    end just before its Optimizer.step#."""
    data = trace_json("user_eager")
    ev = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in ev if e["cat"] == "user_annotation" and e["name"].startswith(STEP)]
    for step in steps:
        optimizer_step = min(e["ts"] for e in ev if e["cat"] == "user_annotation"
                             and e["name"].startswith("Optimizer.step#") and step["ts"] <= e["ts"] < step["ts"] + step["dur"])
        step["dur"] = optimizer_step - step["ts"] - 1
    cut = tmp_path / "cut.pt.trace.json.gz"
    with gzip.open(cut, "wt") as handle:
        json.dump(data, handle)
    phases = json.loads(invoke("analyze", cut, "--json")[1])["summary"]["phases"]
    windows = sorted((s["ts"], s["ts"] + s["dur"]) for s in steps)
    zero_grad = _range_time_per_step(ev, windows, ("Optimizer.zero_grad#",))
    assert phases["optimizer_ms"] == pytest.approx(statistics.median(zero_grad) / 1e3, abs=2e-6)
    assert phases["optimizer_ops"] == 0
    whole = json.loads(invoke("analyze", user_trace("user_eager"), "--json")[1])["summary"]["phases"]
    assert phases["between_iterations_ms"] > whole["between_iterations_ms"] + 0.2   # the step moved there


def test_a_trace_with_cg_advises_ranges_keeps_the_bootstraps_optimizer_phase():
    """cg-advise's own torch.profiler trace has both its `cg-advise:optimizer` ranges and
    torch.optim's `Optimizer.step#Adam.step` inside them: the phase is the bootstrap's."""
    ev = [e for e in json.load(gzip.open(KINETO / "mlp_launch.json.gz"))["traceEvents"] if e.get("ph") == "X"]
    starts = sorted(e["ts"] for e in ev if e["cat"] == "user_annotation" and e["name"] == "cg-advise:iteration")
    windows = list(zip(starts, starts[1:] + [float("inf")]))
    bootstrap = statistics.median(_range_time_per_step(ev, windows, ("cg-advise:optimizer",))) / 1e3
    torch_own = statistics.median(_range_time_per_step(ev, windows, ("Optimizer.step#",))) / 1e3
    phases = json.loads(invoke("analyze", KINETO / "mlp_launch.json.gz", "--json")[1])["summary"]["phases"]
    assert phases["marked"]
    assert phases["optimizer_ms"] == pytest.approx(bootstrap, abs=2e-6)
    assert abs(phases["optimizer_ms"] - torch_own) > 0.05
