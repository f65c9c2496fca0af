"""`cg-advise profile` without a GPU: the nsys command for each option, and every refusal."""

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor import profile as prof
from advisor.cli import cli
from advisor.nsys import MIN_VERSION, Nsys, candidates, parse_version
from conftest import ROOT, cuda_available

SCRIPT = str(ROOT / "tests" / "scripts" / "train_cpu.py")
NOT_PYTHON = str(ROOT / "tests" / "scripts" / "not_python.txt")
NSYS = Nsys("/opt/nsys/bin/nsys", "2025.3.1")


def command(options, args=(SCRIPT, "--steps", "3")):
    return prof.nsys_command(NSYS, options, prof.parse_target(list(args), python="/usr/bin/python3"))


def test_default_command():
    assert command(prof.ProfileOptions(Path("out/report"))) == [
        "/opt/nsys/bin/nsys", "profile", "-t", "cuda,nvtx", "--cuda-graph-trace=graph", "-s", "none",
        "--cpuctxsw=none", "-o", "out/report", "--force-overwrite", "false",
        "/usr/bin/python3", "-m", "advisor.inject", SCRIPT, "--steps", "3"]


def test_every_option_reaches_the_command():
    options = prof.ProfileOptions(Path("r"), trace="osrt,cublas", graph_trace="node", sample_cpu=True, warmup=5,
                                  iterations=10, force=True)
    assert command(options)[:16] == [
        "/opt/nsys/bin/nsys", "profile", "-t", "osrt,cublas,cuda,nvtx", "--cuda-graph-trace=node", "-s", "cpu",
        "--cpuctxsw=process-tree", "--capture-range=cudaProfilerApi", "--capture-range-end=stop",
        "-o", "r", "--force-overwrite", "true", "/usr/bin/python3", "-m"]


def test_window_reaches_the_bootstrap_through_the_environment(tmp_path):
    options = prof.ProfileOptions(Path("r"), warmup=5, iterations=10, run_to_end=True)
    env = prof.child_env(options, tmp_path / "s.json", environ={"PYTHONPATH": "/x"})
    assert env["CG_ADVISE_WARMUP"] == "5" and env["CG_ADVISE_ITERATIONS"] == "10"
    assert env["CG_ADVISE_RUN_TO_END"] == "1"
    assert env["PYTHONPATH"].split(":") == [str(ROOT), "/x"]
    assert "CG_ADVISE_ITERATIONS" not in prof.child_env(prof.ProfileOptions(Path("r")), tmp_path / "s.json", {})


def test_python_dash_m_form_and_interpreter_flags():
    target = prof.parse_target(["python3", "-u", "-m", "pkg.train", "--lr", "0.1"])
    assert (target.python, target.python_flags, target.argv) == ("python3", ["-u"], ["-m", "pkg.train", "--lr", "0.1"])
    cmd = prof.nsys_command(NSYS, prof.ProfileOptions(Path("r")), target)
    assert cmd[cmd.index("python3"):] == ["python3", "-u", "-m", "advisor.inject", "-m", "pkg.train", "--lr", "0.1"]


def test_script_arguments_pass_through_untouched():
    target = prof.parse_target([SCRIPT, "--help", "-o", "x", "--", "--warmup", "3"])
    assert target.argv == [SCRIPT, "--help", "-o", "x", "--", "--warmup", "3"]


def test_nsys_lookup_order(monkeypatch):
    assert candidates("/my/nsys") == ["/my/nsys"]
    assert candidates(None, {"NSYS": "/env/nsys"}) == ["/env/nsys"]
    assert parse_version("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0") == "2025.3.1.90"
    assert Nsys("x", "2021.5.1").version_tuple < MIN_VERSION <= Nsys("x", "2022.4.2").version_tuple


def test_script_tail_leaves_out_nsys_lines():
    run = prof.ProfileRun([], {}, Path("r.nsys-rep"), Path("r.sqlite"), Path("s"), prof.Target("p", [], ["t.py"]))
    for line in ["Traceback (most recent call last):", "RuntimeError: boom", "Collecting data...",
                 "Generating '/tmp/nsys-report-5ba8.qdstrm'", "[1/1] [====100%] r.nsys-rep", "Generated:",
                 "\t/out/r.nsys-rep"]:
        if line.strip() and not prof.NSYS_LINE.match(line):
            run.output_tail.append(line)
    assert prof.script_tail(run) == "RuntimeError: boom"


def test_existing_report_is_kept_unless_forced(tmp_path):
    (tmp_path / "r.nsys-rep").write_text("old")
    options = prof.ProfileOptions(tmp_path / "r")
    with pytest.raises(prof.CgAdviseError) as error:
        prof.check_output(options)
    assert str(error.value) == (f"{tmp_path / 'r.nsys-rep'} exists: pass --force to replace it (kept as "
                                "r.nsys-rep.bak) or choose another --output")
    options.force = True
    assert prof.check_output(options) == [tmp_path / "r.nsys-rep.bak"]
    assert (tmp_path / "r.nsys-rep.bak").read_text() == "old" and not (tmp_path / "r.nsys-rep").exists()


@pytest.mark.skipif(cuda_available(), reason="checks the no-GPU refusal")
def test_no_cuda_device_is_refused():
    with pytest.raises(prof.NoCudaError) as error:
        prof.check_cuda(sys.executable)
    assert error.value.exit_code == 4
    assert str(error.value) == (f"no CUDA device visible to {sys.executable} (torch.cuda.is_available() is False): "
                                "profile on a machine with an NVIDIA GPU")


def run_cli(*args, env=None):
    result = CliRunner().invoke(cli, ["profile", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("args,code,message", [
    ([], 2, "no script given: cg-advise profile [OPTIONS] train.py [ARGS]... or cg-advise profile [OPTIONS] "
            "-- python -m module [ARGS]..."),
    (["missing.py"], 2, "missing.py: no such file"),
    ([NOT_PYTHON], 2, f"{NOT_PYTHON}: not a Python script (SyntaxError at line 1)"),
    (["--", "python3", "-c", "print(1)"], 2, "python -c is not supported: put the code in a script"),
    (["--", "python3"], 2, "nothing to run after python3: give a script or -m module"),
    (["--whole-run", "--warmup", "3", SCRIPT], 2, "--whole-run records every iteration: it takes no --warmup"),
    (["--whole-run", "--run-to-end", SCRIPT], 2, "--whole-run records every iteration: it takes no --run-to-end"),
    (["--nsys", "/nowhere/nsys", SCRIPT], 3, "nsys not found at /nowhere/nsys: install Nsight Systems "
     "(https://developer.nvidia.com/nsight-systems, or the `nsight-systems` package of the CUDA apt repository), "
     "or pass --nsys PATH / set $NSYS"),
])
def test_refusals_are_one_line(args, code, message):
    exit_code, out, err = run_cli(*args)
    assert (exit_code, out, err) == (code, "", f"cg-advise: error: {message}\n")


def test_a_window_is_the_default():
    """Every profile carries an untraced baseline unless --whole-run: warm-up 50, record 20."""
    assert prof.window(None, None, False, False) == (prof.DEFAULT_WARMUP, prof.DEFAULT_ITERATIONS) == (50, 20)
    assert prof.window(4, None, True, False) == (4, 20)
    assert prof.window(None, None, False, True) == (None, None)


def test_run_record_sits_beside_the_report_and_its_export():
    for name in ("out/r.sqlite", "out/r.nsys-rep", "out/r"):
        assert prof.run_record_path(name) == Path("out/r.cg-advise-run.json")
    assert prof.report_files(Path("out/r"))[2] == Path("out/r.cg-advise-run.json")


def test_script_help_is_the_scripts_not_ours():
    # everything after the script is the script's own: click must not answer --help
    code, out, err = run_cli("--nsys", "/nowhere/nsys", SCRIPT, "--help")
    assert code == 3 and "Usage: cg-advise" not in out + err


def test_torchrun_gets_the_bootstrap_in_each_worker():
    target = prof.parse_target(["torchrun", "--nproc_per_node", "2", "--standalone", SCRIPT, "--steps", "3"])
    cmd = prof.nsys_command(NSYS, prof.ProfileOptions(Path("r")), target)
    assert cmd[cmd.index("torchrun"):] == ["torchrun", "--nproc_per_node", "2", "--standalone", "-m",
                                           "advisor.inject", SCRIPT, "--steps", "3"]
    assert target.label == SCRIPT
    target = prof.parse_target(["python3", "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "pkg.train",
                                "--lr", "1"])
    cmd = prof.nsys_command(NSYS, prof.ProfileOptions(Path("r")), target)
    assert cmd[cmd.index("python3"):] == ["python3", "-m", "torch.distributed.run", "--nproc_per_node=2", "-m",
                                          "advisor.inject", "-m", "pkg.train", "--lr", "1"]
    assert target.label == "pkg.train"
    with pytest.raises(prof.CgAdviseError) as error:
        prof.parse_target(["torchrun", "--no-python", "echo"])
    assert str(error.value) == "torchrun --no-python runs no Python: cg-advise needs a Python script or module"


def test_launcher_command_really_runs_the_workers_under_the_bootstrap(tmp_path):
    import json
    import subprocess

    target = prof.parse_target([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                                SCRIPT, "--steps", "3"])
    summary = tmp_path / "summary.json"
    env = prof.child_env(prof.ProfileOptions(tmp_path / "r"), summary)
    result = subprocess.run(target.launcher + target.argv, env=env, capture_output=True, text=True, cwd=tmp_path,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("done") == 2  # both workers ran the script
    assert json.loads(summary.read_text())["iterations"] == 3  # and the bootstrap counted a worker's steps


def test_bootstrap_named_by_hand_is_not_doubled():
    target = prof.parse_target(["torchrun", "--nproc_per_node", "2", "-m", "advisor.inject", SCRIPT, "--steps", "3"])
    assert target.argv == ["--nproc_per_node", "2", "-m", "advisor.inject", SCRIPT, "--steps", "3"]
    assert target.label == SCRIPT
