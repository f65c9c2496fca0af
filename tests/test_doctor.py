"""`cg-advise doctor` on a machine without a GPU (this one and CI): real probes of this
interpreter's CPU torch, no nsys, and every refusal of bad input."""

import json
import shutil
import sys
from importlib.metadata import version

import pytest
from click.testing import CliRunner
from conftest import cuda_available

from advisor import doctor
from advisor.cli import cli

pytestmark = pytest.mark.skipif(cuda_available(), reason="asserts what a machine without a CUDA device reports")


def invoke(*args, env=None):
    result = CliRunner().invoke(cli, ["doctor", *args], env=env)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def report():
    code, out, err = invoke("--json")
    assert code == 1, err
    return json.loads(out)


def test_json_lists_every_check_in_order(report):
    assert report["schema"] == "cg-advise.doctor/1"
    assert [c["name"] for c in report["checks"]] == [
        "python", "cg-advise", "torch", "torch build", "CUDA device", "nsys", "nsys report",
        "analyze packages", "patch packages", "model packages"]
    assert list(report["commands"]) == ["analyze", "profile", "tune", "patch", "model fit/eval"]


def test_cpu_torch_is_found_and_reported_cpu_only(report):
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["torch"]["ok"] is True
    assert checks["torch"]["detail"].startswith(f"{version('torch')} in {sys.executable}")
    assert checks["torch build"] == {
        "name": "torch build", "ok": False, "detail": "CPU-only (torch.version.cuda is None)",
        "fix": f"install a CUDA build of torch in {sys.executable}: https://pytorch.org/get-started/locally/"}
    assert checks["CUDA device"]["ok"] is False
    assert checks["CUDA device"]["detail"] == "torch.cuda.is_available() is False (CPU-only torch)"
    # nsys may or may not be installed here, but without CUDA the report check is never run
    assert checks["nsys report"]["ok"] is None
    assert checks["nsys report"]["detail"].startswith("not tried: ") and "no CUDA device" in checks["nsys report"]["detail"]
    assert checks["analyze packages"] == {"name": "analyze packages", "ok": True,
                                          "detail": "numpy, sqlite_utils, rich", "fix": ""}
    assert checks["patch packages"]["ok"] is True


def test_gpu_commands_unavailable_with_the_reason_and_static_ones_available(report):
    commands = report["commands"]
    assert commands["analyze"]["ok"] is True and commands["patch"]["ok"] is True
    assert commands["model fit/eval"]["ok"] is True
    assert commands["tune"] == {"ok": False, "reason": "torch build: CPU-only (torch.version.cuda is None); "
                                                        "CUDA device: torch.cuda.is_available() is False (CPU-only torch)"}
    assert commands["profile"]["ok"] is False
    assert commands["profile"]["reason"].startswith(commands["tune"]["reason"])


def test_plain_output_with_a_missing_nsys(tmp_path):
    fake = tmp_path / "no-such" / "nsys"
    code, out, err = invoke("--nsys", str(fake))
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0] == "checks"
    assert f"  FAIL  nsys              nsys not found at {fake}" in lines
    assert "  n/a   nsys report       not tried: no nsys, no CUDA device" in lines
    commands = lines[lines.index("what each command can do here") + 1:]
    assert [line.split()[:2] for line in commands] == [
        ["yes", "analyze"], ["no", "profile"], ["no", "tune"], ["yes", "patch"], ["yes", "model"]]
    assert "nsys" not in commands[1] and "nsys" not in commands[2]   # profile (torch.profiler) and tune need no nsys


def test_profile_runs_under_torch_profiler_where_nsys_is_missing_or_broken(report):
    """On a GPU machine: no nsys (or one that cannot write a report) leaves the torch backend."""
    checks = {c["name"]: doctor.Check(**c) for c in report["checks"]}
    for name in ("torch build", "CUDA device"):
        checks[name] = doctor.Check(name, True, "CUDA 13.0")
    checks["nsys"] = doctor.Check("nsys", False, "Nsight Systems (nsys) not found")
    checks["nsys report"] = doctor.Check("nsys report", None, "not tried: no nsys")
    ok, reason = doctor.capabilities(list(checks.values()))["profile"]
    assert ok and reason == ("runs your script under torch.profiler (chosen where no nsys is found) and analyses the "
                             "trace; nsys: Nsight Systems (nsys) not found")
    checks["nsys"] = doctor.Check("nsys", True, "2025.3.1")
    checks["nsys report"] = doctor.Check("nsys report", False, "nsys left only a .qdstrm")
    ok, reason = doctor.capabilities(list(checks.values()))["profile"]
    assert ok and reason == ("runs your script with --backend torch (torch.profiler) and analyses the trace; "
                             "nsys report: nsys left only a .qdstrm")


def test_missing_python_is_bad_input_in_one_line():
    code, out, err = invoke("--python", "/nonexistent/python")
    assert (code, out) == (2, "")
    assert err == "cg-advise: error: --python /nonexistent/python: not found or not executable\n"


def test_an_executable_that_is_no_python_is_bad_input():
    true = shutil.which("true")
    code, out, err = invoke("--python", true)
    assert (code, out) == (2, "")
    assert err == f"cg-advise: error: --python {true}: not a Python 3 interpreter (it did not run `python -c`)\n"


@pytest.mark.parametrize("packages, check, blocked", [
    ("MODEL_PACKAGES", "model packages", {"model fit/eval"}),
    ("PATCH_PACKAGES", "patch packages", {"patch", "tune", "profile"}),   # profile: no CUDA here either
])
def test_a_missing_package_blocks_the_commands_that_import_it(report, monkeypatch, packages, check, blocked):
    monkeypatch.setitem(getattr(doctor, packages), "cg_advise_no_such_module", "cg-advise-no-such-module")
    missing = doctor.package_check(check, getattr(doctor, packages))
    assert (missing.ok, missing.detail) == (False, "missing: cg_advise_no_such_module")
    assert missing.fix == f"{sys.executable} -m pip install cg-advise-no-such-module"
    checks = [missing if c["name"] == check else doctor.Check(**c) for c in report["checks"]]
    can = doctor.capabilities(checks)
    assert {name for name, (ok, _) in can.items() if not ok} == blocked | {"tune", "profile"}
    for name in blocked - {"profile"}:
        assert f"{check}: missing: cg_advise_no_such_module" in can[name][1]
