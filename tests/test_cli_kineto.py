"""The torch.profiler backend through click's CliRunner: `analyze x.json.gz`, and `profile`'s
backend choice, run end to end on the CPU (the trace then holds no CUDA activity)."""

import gzip
import json
import os
import shutil
import sys

import pytest
from click.testing import CliRunner

from advisor import profile as prof
from advisor import ranges
from advisor.cli import cli
from advisor.nsys import NsysError, find_nsys
from advisor.predict import load_model
from conftest import ROOT, TRACES

KINETO = TRACES / "kineto"
SCRIPT = str(ROOT / "tests" / "scripts" / "train_cpu.py")
NO_CUDA = "cg-advise: error: {name}: no CUDA activity in this torch.profiler trace (CPU operators only); " \
          "record it with ProfilerActivity.CUDA on a machine with an NVIDIA GPU\n"


def invoke(*args, env=None):
    result = CliRunner().invoke(cli, [*map(str, args)], env=env, prog_name="cg-advise")
    return result.exit_code, result.stdout, result.stderr


def nsys_installed() -> bool:
    try:
        find_nsys()
    except NsysError:
        return False
    return True


def test_analyze_a_kineto_trace_as_json():
    code, out, err = invoke("analyze", KINETO / "mlp_launch.json.gz", "--json")
    assert code == 1 and err == ""   # launch-bound: a finding
    data = json.loads(out)
    assert data["schema"] == "cg-advise.analysis/2"
    assert data["trace"]["backend"] == "torch.profiler" and data["trace"]["graph_trace_mode"] == "none"
    with gzip.open(KINETO / "mlp_launch.json.gz") as handle:
        events = json.load(handle)["traceEvents"]
    kernels = sum(1 for e in events if e.get("cat") == "kernel")
    iterations = sum(1 for e in events if e.get("cat") == "user_annotation" and e["name"] == ranges.ITERATION)
    s = data["summary"]
    assert (s["iterations"], s["kernels_per_iteration"], s["verdict"]) == (iterations, kernels / iterations,
                                                                           "launch-bound")
    # no run record beside it: the eager time is estimated, and said to be
    assert data["predictions"]["eager_source"] == "estimated"


def test_analyze_names_the_backend_in_the_report(monkeypatch):
    # a path relative to the checkout, so that where rich wraps the first line at 120 columns
    # does not depend on where the checkout lies (an absolute path moved the wrap onto a space,
    # which rich drops)
    monkeypatch.chdir(ROOT)
    code, out, err = invoke("analyze", (KINETO / "mlp_graphed.json.gz").relative_to(ROOT))
    assert code == 0 and err == ""
    assert out.splitlines()[:2] == [
        "sample_traces/kineto/mlp_graphed.json.gz  torch.profiler (Kineto trace schema 1, CUPTI 130001; graph replays "
        "read from ", "4600 node records), graph trace: graph"]
    assert "\niterations: 20 from injected range 'cg-advise:iteration'\nverdict: graphed\n" in out


def test_analyze_reads_the_run_record_beside_a_torch_trace(tmp_path):
    """profile's layout: NAME.kineto.json.gz beside NAME.cg-advise-run.json."""
    trace = tmp_path / "r.kineto.json.gz"
    shutil.copy(KINETO / "mlp_launch.json.gz", trace)
    untraced = json.loads((KINETO / "mlp_launch.summary.json").read_text())["untraced"]
    (tmp_path / "r.cg-advise-run.json").write_text(json.dumps({"schema": "cg-advise.run/1",
                                                               "backend": "torch.profiler", "untraced": untraced}))
    code, out, err = invoke("analyze", trace, "--json")
    assert code == 1 and err == ""
    predictions = json.loads(out)["predictions"]
    assert predictions["eager_source"] == "measured"
    factor = load_model()["baseline_factor"]   # the model's, as for an nsys profile
    assert predictions["eager_ms"] == pytest.approx(untraced["gpu_ms_per_iteration"] * factor, rel=1e-9)


def test_without_a_baseline_the_eager_time_is_estimated_with_torch_profilers_cost():
    code, out, err = invoke("analyze", KINETO / "mlp_launch.json.gz", "--json")
    data = json.loads(out)
    s, predictions = data["summary"], data["predictions"]
    expected = max(s["gpu_busy_ms_per_iteration"], s["gpu_period_ms"] - 0.031 * s["gpu_ops_per_iteration"])
    assert predictions["eager_source"] == "estimated"
    assert predictions["eager_ms"] == pytest.approx(expected, rel=1e-9)


def test_a_damaged_kineto_trace_is_one_line(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes((KINETO / "mlp_infer.json.gz").read_bytes()[:5000])
    code, out, err = invoke("analyze", path)
    assert (code, out) == (2, "")
    assert err == (f"cg-advise: error: {path}: not a readable torch.profiler trace (Compressed file ended before the "
                   "end-of-stream marker was reached); is it truncated?\n")


def test_run_record_beside_torch_traces():
    assert prof.run_record_path("out/r.kineto.json.gz") == prof.run_record_path("out/r.json.gz") \
        == prof.run_record_path("out/r.json") == prof.run_record_path("out/r.sqlite")
    assert prof.report_files(prof.Path("out/r"), prof.TORCH) == [prof.Path("out/r.kineto.json.gz"),
                                                                  prof.Path("out/r.cg-advise-run.json")]


@pytest.mark.parametrize("args,message", [
    (["--backend", "torch", "--sample-cpu", SCRIPT], "--sample-cpu is an Nsight Systems option: --backend torch "
                                                     "takes none"),
    (["--backend", "torch", "-t", "cuda,osrt", SCRIPT], "-t/--trace is an Nsight Systems option: --backend torch "
                                                        "takes none"),
    (["--backend", "torch", "--nsys", "/opt/nsys", SCRIPT], "--nsys is an Nsight Systems option: --backend torch "
                                                            "takes none"),
    (["--backend", "torch", "--", "torchrun", "--nproc_per_node", "2", SCRIPT],
     "--backend torch profiles one process: under a distributed launcher use nsys (--backend nsys), or profile one "
     "rank's script directly"),
    (["--backend", "cupti", SCRIPT], "Invalid value for '--backend': 'cupti' is not one of 'auto', 'nsys', 'torch'. "
                                     "(see `cg-advise profile --help`)"),
])
def test_backend_refusals_are_one_line(args, message):
    assert invoke("profile", *args) == (2, "", f"cg-advise: error: {message}\n")


def test_an_nsys_option_means_nsys():
    """auto never drops an option the user gave: with --cuda-graph-trace and no nsys there, exit 3."""
    code, out, err = invoke("profile", "--cuda-graph-trace", "node", SCRIPT, env={"NSYS": "/nowhere/nsys"})
    assert (code, out) == (3, "") and err.startswith("cg-advise: error: nsys not found at /nowhere/nsys: install")


def check_torch_run(folder, name, steps_recorded):
    """The trace and run record a CPU profile leaves: the window's ranges, the baseline."""
    trace = folder / f"{name}.kineto.json.gz"
    with gzip.open(trace) as handle:
        events = json.load(handle)["traceEvents"]
    recorded = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == ranges.ITERATION]
    assert len(recorded) == steps_recorded
    assert not any(e.get("cat") in ("kernel", "cuda_runtime") for e in events)
    record = json.loads((folder / f"{name}.cg-advise-run.json").read_text())
    assert record["backend"] == "torch.profiler" and record["window"] == {"warmup": 4, "iterations": steps_recorded}
    # iterations 2..4 of the warm-up timed, and at least as many after the window: more, to the
    # script's end, until 3 s are timed
    chunks = record["untraced"]["chunks"]
    assert chunks[0] == 2 and chunks[1] >= 2 and record["untraced"]["iterations"] == sum(chunks)
    assert record["applied"]["kind"] == "train"
    assert record["bootstrap"]["trained_parameters"] == 6   # the model's feature param_tensors: 3 Linear layers


@pytest.mark.skipif(nsys_installed(), reason="checks the fallback where no nsys is installed")
def test_auto_falls_back_to_torch_without_nsys_and_says_so(tmp_path):
    env = {"CG_ADVISE_ALLOW_NO_CUDA": "1", "NSYS": None, "PATH": os.path.dirname(sys.executable)}
    code, out, err = invoke("profile", "--output-dir", tmp_path, "--warmup", "4", "--iterations", "3", SCRIPT,
                            "--steps", "10", env=env)
    lines = err.splitlines()
    assert lines[0] == ("cg-advise: Nsight Systems (nsys) not found on PATH or in /opt/nvidia, /usr/local/cuda*: "
                        "profiling with torch.profiler instead (--backend torch; --backend nsys to insist)")
    assert lines[1].startswith(f"cg-advise: torch.profiler: CG_ADVISE_KINETO_TRACE={tmp_path}/cg-advise-train_cpu"
                               f".kineto.json.gz {sys.executable} -m advisor.inject {SCRIPT} --steps 10")
    assert err.endswith(NO_CUDA.format(name="cg-advise-train_cpu.kineto.json.gz"))
    assert (code, out) == (2, "")
    check_torch_run(tmp_path, "cg-advise-train_cpu", 3)


def test_torch_backend_end_to_end_on_the_cpu_keeps_the_old_trace_with_force(tmp_path, monkeypatch):
    from advisor import runrecord

    # no GPU calibrated (as on a machine without one, whatever this one has)
    monkeypatch.setattr(runrecord, "calibration", lambda python, capturable=(): {"error": "no CUDA device"})
    (tmp_path / "r.kineto.json.gz").write_text("old")
    args = ("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "r", "--warmup", "4", "--iterations", "2",
            SCRIPT, "--steps", "10")
    env = {"CG_ADVISE_ALLOW_NO_CUDA": "1"}
    code, out, err = invoke(*args, env=env)
    assert (code, out) == (2, "") and err == (f"cg-advise: error: {tmp_path}/r.kineto.json.gz exists: pass --force to "
                                              "replace it (kept as r.kineto.json.gz.bak) or choose another --output\n")
    code, out, err = invoke(*args[:1], "--force", *args[1:], env=env)
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == "cg-advise: kept the previous r.kineto.json.gz as r.kineto.json.gz.bak"
    assert "cg-advise: trace: " in err and err.endswith(NO_CUDA.format(name="r.kineto.json.gz"))
    assert (tmp_path / "r.kineto.json.gz.bak").read_text() == "old"
    check_torch_run(tmp_path, "r", 2)
    # no GPU calibrated here: by default no bare processes (there is no graph for tune to time)
    assert "fresh processes" not in err
    assert "bare_baseline" not in json.loads((tmp_path / "r.cg-advise-run.json").read_text())


def test_profile_times_the_eager_loop_in_three_bare_processes_where_the_gpu_was_calibrated(tmp_path, monkeypatch):
    """Not told, profile hands bare_baseline three processes once the GPU is calibrated (both
    stubbed here: this machine may have none); where they fail, it says what the prediction
    uses instead."""
    from advisor import runrecord

    taken = []
    monkeypatch.setattr(runrecord, "calibration", lambda python, capturable=(): {
        "gpu": "stub", "graph_node_us": 1.2, "graph_launch_us": 7.0, "eager_launch_us": 9.0})
    monkeypatch.setattr(runrecord, "bare_baseline",
                        lambda target, applied, runs: taken.append(runs) or {"error": "stubbed"})
    code, out, err = invoke("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "r", "--warmup", "4",
                            "--iterations", "2", SCRIPT, "--steps", "10", env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    lines = err.splitlines()
    assert taken == [3]
    assert ("cg-advise: timing the eager loop in 3 fresh processes without a profiler (Ctrl-C skips them, "
            "--baseline-runs 0 too)") in lines
    assert ("cg-advise: eager loop in fresh processes: stubbed; the prediction uses the profiled process's own "
            "baseline") in lines


def test_the_default_takes_no_bare_processes_where_they_cannot_run_or_would_run_long():
    from advisor import runrecord
    from advisor.profile import Target

    calibrated, script, loop = {"graph_node_us": 1.2}, Target(sys.executable, [], ["train.py"]), {"kind": "train"}
    assert runrecord.default_baseline_runs(calibrated, script, loop, 2.0) == (3, None)
    assert runrecord.default_baseline_runs({"error": "no CUDA device"}, script, loop, 2.0) == (0, None)
    assert runrecord.default_baseline_runs(calibrated, Target(sys.executable, [], ["-m", "pkg"]), loop, 2.0) == (0, None)
    assert runrecord.default_baseline_runs(calibrated, script, {"error": "no loop"}, 2.0) == (0, None)
    assert runrecord.default_baseline_runs(calibrated, script, None, 2.0) == (0, None)
    # 3 x 110 steps of 400 ms: 132 s of steps, over the default's 120
    assert runrecord.default_baseline_runs(calibrated, script, loop, 400.0) == (0, (
        "eager loop in fresh processes: not timed by default, 3 of them would run 132 s of steps (400 ms each); "
        "--baseline-runs 3 takes them"))
    assert runrecord.default_baseline_runs(calibrated, script, loop, 360.0)[0] == 3   # 119 s


def test_events_with_times_or_ids_that_are_not_numbers_are_skipped(tmp_path):
    """NaN or overflowing times and ids past the global-id range are no events: skipped, no
    warning, no overflow; the rest of the trace is analysed."""
    with gzip.open(KINETO / "mlp_infer.json.gz") as handle:
        data = json.load(handle)
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    kernels[0]["ts"], kernels[1]["dur"], kernels[2]["pid"] = float("nan"), 1e300, 2 ** 45
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    code, out, err = invoke("analyze", "--json", bad)
    assert code in (0, 1) and err == "" and json.loads(out)["summary"]["verdict"]
    from advisor.trace import OP_KERNEL, open_trace

    assert int((open_trace(bad).ops["kind"] == OP_KERNEL).sum()) == len(kernels) - 3


def test_baseline_runs_times_the_eager_loop_in_fresh_processes(tmp_path):
    """--baseline-runs 2: the eager loop timed as tune times it, in two processes without a
    profiler (a 30-step script: the window shrinks to what it has, as tune's does); the run
    record keeps both and the prediction divides their median, taken as it is (no factor for
    the profiler's cost: none was attached)."""
    env = {"CG_ADVISE_ALLOW_NO_CUDA": "1"}
    code, out, err = invoke("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "r", "--warmup", "4",
                            "--iterations", "2", "--baseline-runs", "2", SCRIPT, "--steps", "30", env=env)
    assert (code, out) == (2, "") and err.endswith(NO_CUDA.format(name="r.kineto.json.gz"))
    lines = err.splitlines()
    assert "cg-advise: timing the eager loop in 2 fresh processes without a profiler (Ctrl-C skips them, --baseline-runs 0 too)" in lines
    bare = json.loads((tmp_path / "r.cg-advise-run.json").read_text())["bare_baseline"]
    assert bare["runs"] == 2 and len(bare["run_ms"]) == 2 and (bare["warmup"], bare["iterations"]) == (3, 26)
    low, high = sorted(bare["run_ms"])
    assert bare["ms_per_iteration"] == pytest.approx((low + high) / 2) and low > 0
    assert (f"cg-advise: eager, 2 bare processes: {bare['run_ms'][0]:.3f}, {bare['run_ms'][1]:.3f} ms/iteration "
            f"(median {bare['ms_per_iteration']:.3f})") in lines
    from advisor.predict import BARE_SOURCE, eager_ms, features_of

    record = json.loads((tmp_path / "r.cg-advise-run.json").read_text())
    features = features_of({"gpu_busy_ms_per_iteration": 0.001, "gpu_period_ms": 1e6, "gpu_ops_per_iteration": 1},
                           record)
    assert eager_ms(features, load_model()) == (pytest.approx(bare["ms_per_iteration"]), BARE_SOURCE)
    # the bootstrap's own baseline stays in its column (the constants are fitted on it)
    assert features["baseline_ms"] == pytest.approx(record["untraced"]["host_ms_per_iteration"])


def test_baseline_runs_says_why_it_was_not_taken():
    """-m module, or a script whose loop was not found: one reason, recorded; the profile goes
    on without it."""
    from advisor import runrecord
    from advisor.profile import Target

    bare = runrecord.bare_baseline(Target(sys.executable, [], ["-m", "pkg.train"]), None, 2)
    assert bare == {"error": "not taken for -m module (the harness runs a script file)"}
    bare = runrecord.bare_baseline(Target(sys.executable, [], ["train.py"]), {"error": "no loop in train.py"}, 2)
    assert bare == {"error": "no training or inference loop to time: no loop in train.py"}


def test_the_bare_baseline_times_a_step_of_two_backward_calls_whole(tmp_path):
    """A loop without an optimizer that backs two losses an iteration (3 ms slept after each
    backward): the bare baseline counts the backward() calls discovery counts for a step, as
    tune does, so it times whole iterations (about 6 ms), not halves."""
    from advisor import runrecord
    from advisor.profile import Target

    script = tmp_path / "two.py"
    script.write_text(
        "import time\nimport torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\nx = torch.randn(8, 4)\n"
        "for step in range(200):\n    model.zero_grad()\n    model(x).sum().backward()\n    time.sleep(0.003)\n"
        "    model(x + 1).sum().backward()\n    time.sleep(0.003)\n"
        "    with torch.no_grad():\n        for p in model.parameters():\n            p.add_(p.grad, alpha=-0.01)\n")
    applied = runrecord.applied_scopes(script)
    assert applied["counts"] == "backward" and applied["backward_calls"] == 2
    bare = runrecord.bare_baseline(Target(sys.executable, [], [str(script)]), applied, 1)
    assert 6.0 <= bare["ms_per_iteration"] < 12.0, bare


def test_a_script_shorter_than_the_default_window_is_profiled_again_with_one_that_fits(tmp_path):
    """30 steps never reach the default warm-up (50): the run ends with no window, and profile
    runs the script again with one that fits it (40 % warm-up, 20 % recorded, at least 20 %
    timed after: 12, 6 and 6 of 30) instead of stopping on the error. A window the user chose is
    theirs: the error stands, one line."""
    env = {"CG_ADVISE_ALLOW_NO_CUDA": "1"}
    code, out, err = invoke("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "r", SCRIPT,
                            "--steps", "30", env=env)
    assert (f"cg-advise: {SCRIPT} ran 30 iterations, fewer than the default warm-up (50): profiling it again "
            "with --warmup 12 --iterations 6") in err
    assert (code, out) == (2, "") and err.endswith(NO_CUDA.format(name="r.kineto.json.gz"))   # a CPU trace
    record = json.loads((tmp_path / "r.cg-advise-run.json").read_text())
    assert record["window"] == {"warmup": 12, "iterations": 6}
    assert record["untraced"]["chunks"] == [6, 12]   # after the window: on to the script's end, short of 3 s
    code, out, err = invoke("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "mine", "--warmup", "40",
                            SCRIPT, "--steps", "30", env=env)
    assert (code, out) == (2, "") and err.splitlines()[-1] == (
        f"cg-advise: error: {SCRIPT} ran 30 iterations, not more than --warmup 40: the recording window never opened "
        "(give a smaller --warmup, or --whole-run to record the whole script)")
    assert prof.shrunk_window(9) is None and prof.shrunk_window(10) == (4, 2)
    # the window waits for 10 minutes of untraced steps (CG_ADVISE_BASELINE_BEFORE) and never opens:
    # profiled again, the same window opening after the warm-up
    env["CG_ADVISE_BASELINE_BEFORE"] = "600"
    code, out, err = invoke("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "wait", "--warmup", "4",
                            "--iterations", "2", SCRIPT, "--steps", "30", env=env)
    assert (f"cg-advise: {SCRIPT} ran 30 iterations, all of them before the recording window opened "
            "(CG_ADVISE_BASELINE_BEFORE): profiling it again, the window opening after the warm-up") in err
    assert (code, out) == (2, "") and err.endswith(NO_CUDA.format(name="wait.kineto.json.gz"))
    record = json.loads((tmp_path / "wait.cg-advise-run.json").read_text())
    assert record["window"] == {"warmup": 4, "iterations": 2} and record["untraced"]["chunks"][0] == 2
    # shorter than the default warm-up as well: the shrunk window's run does not wait either
    code, out, err = invoke("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "short", SCRIPT,
                            "--steps", "30", env=env)
    assert "fewer than the default warm-up (50): profiling it again with --warmup 12 --iterations 6" in err
    assert (code, out) == (2, "") and err.endswith(NO_CUDA.format(name="short.kineto.json.gz"))
    record = json.loads((tmp_path / "short.cg-advise-run.json").read_text())
    assert record["window"] == {"warmup": 12, "iterations": 6} and record["bootstrap"]["window_opened_at"] == 12


@pytest.mark.parametrize("name, value", [("CG_ADVISE_BASELINE_BEFORE", "3s"), ("CG_ADVISE_BASELINE_SECONDS", "-1"),
                                         ("CG_ADVISE_BASELINE_BEFORE", "nan")])
def test_a_bad_seconds_setting_is_one_line_before_anything_runs(tmp_path, name, value):
    """The bootstrap reads the baseline's seconds in the script's own process: a value that is not
    a number of seconds is refused by profile first, one line and exit 2, nothing written."""
    code, out, err = invoke("profile", "--backend", "torch", "--output-dir", tmp_path, "-o", "r", SCRIPT,
                            "--steps", "30", env={"CG_ADVISE_ALLOW_NO_CUDA": "1", name: value})
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [f"cg-advise: error: {name}={value!r}: not a number of seconds (0 or more)"]
    assert list(tmp_path.iterdir()) == []
