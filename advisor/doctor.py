"""`cg-advise doctor`: what each command can do on this machine, and what to install where it cannot.

Every check is cheap and bounded by a timeout, so the doctor answers even when a driver or
nsys hangs. torch is probed in the interpreter that runs the user's script (``--python``), in a
subprocess: the script runs with that torch, not ours. nsys is tried for real, on a one-kernel
script run exactly as `cg-advise profile` runs one, because a found nsys can still fail to
write or export a report (a container without CUPTI access, say).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import __version__
from . import profile as prof
from .errors import CgAdviseError
from .nsys import HOW_TO_GET, Nsys, NsysError, export_command, find_nsys

PROBE_TIMEOUT_S = 120   # importing torch and starting CUDA on a cold machine
NSYS_TIMEOUT_S = 60
GET_TORCH = "https://pytorch.org/get-started/locally/"
# import name -> pip name, by what needs them: reading exports and printing tables; rewriting
# scripts (patch, tune); fitting the model
ANALYZE_PACKAGES = {"numpy": "numpy", "sqlite_utils": "sqlite-utils", "rich": "rich"}
PATCH_PACKAGES = {"libcst": "libcst", "pyflakes": "pyflakes"}   # rewrite, then check no name is left unbound
MODEL_PACKAGES = {"sklearn": "scikit-learn", "scipy": "scipy"}
ONE_KERNEL = "import torch; torch.ones(1, device='cuda').sum().item()"

# The first line proves the interpreter is a Python 3; the second says what its torch sees.
TORCH_PROBE = r"""
import json, sys
print(json.dumps({"python": sys.version.split()[0]}), flush=True)
try:
    import torch
except Exception as error:
    print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
    sys.exit()
info = {"version": torch.__version__, "cuda": torch.version.cuda, "available": torch.cuda.is_available()}
if info["available"]:
    info["devices"] = ["%s (sm_%d%d)" % ((torch.cuda.get_device_name(i),) + torch.cuda.get_device_capability(i))
                       for i in range(torch.cuda.device_count())]
print(json.dumps(info))
"""


@dataclass
class Check:
    """One finding. ok: True fine, False something to fix, None not applicable (an earlier check failed)."""

    name: str
    ok: bool | None
    detail: str
    fix: str = ""


def run_checks(python: str = sys.executable, nsys_path: str | None = None,
               note: Callable[[str], None] = lambda message: None) -> list[Check]:
    """All checks, in the order they are shown; raises CgAdviseError when ``python`` is no interpreter."""
    interpreter = resolve_python(python)
    checks = [Check("python", sys.version_info >= (3, 9), f"{platform.python_version()} ({sys.executable})",
                    "" if sys.version_info >= (3, 9) else "cg-advise needs Python 3.9 or newer"),
              Check("cg-advise", True, f"{__version__} ({Path(__file__).resolve().parent})")]
    checks += torch_checks(interpreter)
    nsys_check, nsys = check_nsys(nsys_path)
    checks.append(nsys_check)
    cuda_ok = any(check.name == "CUDA device" and check.ok for check in checks)
    if nsys and cuda_ok:
        note(f"profiling a one-kernel script under nsys {nsys.version} (at most {2 * NSYS_TIMEOUT_S} s)")
    checks.append(check_nsys_report(nsys, interpreter, cuda_ok))
    checks += [package_check("analyze packages", ANALYZE_PACKAGES), package_check("patch packages", PATCH_PACKAGES),
               package_check("model packages", MODEL_PACKAGES)]
    return checks


def resolve_python(python: str) -> str:
    found = shutil.which(python)
    if not found:
        raise CgAdviseError(f"--python {python}: not found or not executable")
    return found


def torch_checks(python: str) -> list[Check]:
    """torch, its build and the CUDA devices it sees, as the user's interpreter reports them."""
    answer, problem = probe_torch(python)
    install = f"{python} -m pip install torch (a CUDA build: {GET_TORCH})"
    if problem:
        skip = f"not checked: {problem}"
        return [Check("torch", False, problem, install), Check("torch build", None, skip),
                Check("CUDA device", None, skip)]
    where = f"in {python} (Python {answer['python']})"
    if "error" in answer:
        skip = "not checked: no torch"
        return [Check("torch", False, f"not importable {where}: {answer['error']}", install),
                Check("torch build", None, skip), Check("CUDA device", None, skip)]
    torch = Check("torch", True, f"{answer['version']} {where}")
    if answer["cuda"] is None:
        return [torch, Check("torch build", False, "CPU-only (torch.version.cuda is None)",
                             f"install a CUDA build of torch in {python}: {GET_TORCH}"),
                Check("CUDA device", False, "torch.cuda.is_available() is False (CPU-only torch)",
                      "a CUDA build of torch (above), on a machine with an NVIDIA GPU")]
    build = Check("torch build", True, f"CUDA {answer['cuda']}")
    if not answer["available"]:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hidden = f", CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        return [torch, build, Check("CUDA device", False, f"torch.cuda.is_available() is False{hidden}",
                                    "check `nvidia-smi`, the driver (new enough for CUDA "
                                    f"{answer['cuda']}) and CUDA_VISIBLE_DEVICES")]
    devices = ", ".join(f"{n} x {name}" if n > 1 else name for name, n in Counter(answer["devices"]).items())
    return [torch, build, Check("CUDA device", True, devices)]


def probe_torch(python: str) -> tuple[dict, str]:
    """(what the probe printed, "") or ({}, why the interpreter gave no usable answer). An
    interpreter that is not a Python 3 at all is bad input: CgAdviseError."""
    try:
        result = run_bounded([python, "-c", TORCH_PROBE], PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {}, f"{python} took over {PROBE_TIMEOUT_S} s to import torch and look for a GPU"
    except OSError as error:
        raise CgAdviseError(f"--python {python}: cannot run it ({error.strerror or error})") from None
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if not lines or "python" not in lines[0]:
        raise CgAdviseError(f"--python {python}: not a Python 3 interpreter (it did not run `python -c`)")
    if len(lines) < 2:
        tail = (result.stderr.strip().splitlines() or ["no message"])[-1]
        return {}, f"importing torch in {python} crashed (exit {result.returncode}): {tail}"
    return {**lines[0], **lines[1]}, ""


def check_nsys(nsys_path: str | None) -> tuple[Check, Nsys | None]:
    try:
        nsys = find_nsys(nsys_path)
    except NsysError as error:
        return Check("nsys", False, str(error).replace(f": {HOW_TO_GET}", ""), HOW_TO_GET), None
    return Check("nsys", True, f"{nsys.version} at {nsys.path}"), nsys


def check_nsys_report(nsys: Nsys | None, python: str, cuda_ok: bool) -> Check:
    """Profiles a one-kernel script the way `profile` does (its nsys command, environment and
    NVTX bootstrap), exports the report to SQLite and counts the kernels traced."""
    missing = ([] if nsys else ["no nsys"]) + ([] if cuda_ok else ["no CUDA device"])
    if missing:
        return Check("nsys report", None, f"not tried: {', '.join(missing)}")
    by_hand = f"run `{nsys.path} profile -t cuda -o /tmp/cg-doctor {python} -c \"{ONE_KERNEL}\"` to see nsys's message"
    with tempfile.TemporaryDirectory(prefix="cg-advise-doctor-") as folder:
        script = Path(folder) / "one_kernel.py"
        script.write_text(ONE_KERNEL + "\n")
        options = prof.ProfileOptions(Path(folder) / "doctor", force=True)
        report, sqlite = prof.report_files(options.output)[:2]
        command = prof.nsys_command(nsys, options, prof.Target(python, [], [str(script)]))
        try:
            ran = run_bounded(command, NSYS_TIMEOUT_S, prof.child_env(options, Path(folder) / "summary.json"))
            if not report.exists() and any(Path(folder).glob("*.qdstrm")):
                return Check("nsys report", False, "nsys wrote only its raw .qdstrm capture, not a .nsys-rep: "
                                                   f"{nsys_message(ran)}",
                             f"this nsys cannot import its captures (the one inside Nsight Compute often cannot): "
                             f"{HOW_TO_GET}")
            if not report.exists():
                return Check("nsys report", False, f"nsys profile wrote no report (exit {ran.returncode}): "
                                                   f"{nsys_message(ran)}", by_hand)
            exported = run_bounded(export_command(nsys, report, sqlite), NSYS_TIMEOUT_S)
            if exported.returncode != 0 or not sqlite.exists():
                return Check("nsys report", False, f"nsys export --type sqlite failed: {nsys_message(exported)}",
                             f"try `{nsys.path} export --type sqlite` on any report; a newer nsys may help")
        except subprocess.TimeoutExpired as error:
            return Check("nsys report", False, f"`{' '.join(error.cmd[:2])}` took over {NSYS_TIMEOUT_S} s", by_hand)
        except OSError as error:
            return Check("nsys report", False, f"cannot run {nsys.path}: {error.strerror or error}", HOW_TO_GET)
        kernels = count_kernels(sqlite)
    if not kernels:
        return Check("nsys report", False, "the report holds no CUDA kernel: nsys cannot trace CUDA here",
                     "nsys needs CUPTI access to the GPU (in a container: the driver's profiling permission); "
                     + by_hand)
    return Check("nsys report", True, f"profiled a one-kernel script and exported it to SQLite ({kernels} kernels)")


def run_bounded(command: list, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    """subprocess.run that, on timeout, also ends what the command started (nsys leaves its
    target running otherwise), then raises TimeoutExpired."""
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                          env=env, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def nsys_message(result: subprocess.CompletedProcess) -> str:
    """nsys's own error lines where it printed some (its last line is often just a file name)."""
    lines = [line.strip() for line in (result.stdout + "\n" + result.stderr).splitlines() if line.strip()]
    errors = [line for line in lines if re.search(r"error|unable|fail", line, re.IGNORECASE)]
    return " ".join(errors[:2]) if errors else (lines[-1] if lines else "no message")


def count_kernels(sqlite: Path) -> int:
    from .columns import read_only_uri

    connection = sqlite3.connect(read_only_uri(sqlite), uri=True)
    try:
        return connection.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    except sqlite3.Error:   # no such table: no kernel was traced
        return 0
    finally:
        connection.close()


def package_check(name: str, packages: dict) -> Check:
    """Importable in this process, found without importing them (sklearn and scipy are slow to import)."""
    missing = [module for module in packages if importlib.util.find_spec(module) is None]
    if missing:
        return Check(name, False, f"missing: {', '.join(missing)}",
                     f"{sys.executable} -m pip install {' '.join(packages[m] for m in missing)}")
    return Check(name, True, ", ".join(packages))


# command -> (checks it needs, what it does when it can)
NEEDS = {
    "analyze": (("analyze packages",), "reads nsys SQLite exports"),
    "profile": (("analyze packages", "torch", "torch build", "CUDA device"),   # nsys, or torch.profiler without it
                "runs your script under nsys and analyses the report"),
    "tune": (("analyze packages", "patch packages", "torch", "torch build", "CUDA device"),
             "times each capture scope on this GPU"),
    "patch": (("patch packages",), "rewrites your training loop (static, no GPU needed)"),
    "model fit/eval": (("analyze packages", "model packages"), "fits and evaluates the benefit model"),
}


def capabilities(checks: list[Check]) -> dict[str, tuple[bool, str]]:
    """Each command: whether it can run here, and what it does, or the failed checks that stop it."""
    by_name = {check.name: check for check in checks}
    result = {}
    for command, (needs, does) in NEEDS.items():
        blocking = [by_name[name] for name in needs if by_name[name].ok is not True]
        if blocking:
            failed = [check for check in blocking if check.ok is False] or blocking
            result[command] = (False, "; ".join(f"{check.name}: {check.detail}" for check in failed))
        elif command == "analyze" and not by_name["nsys"].ok:
            result[command] = (True, f"{does}; a .nsys-rep needs nsys (or `nsys export --type sqlite` elsewhere)")
        elif command == "profile" and not (by_name["nsys"].ok and by_name["nsys report"].ok):
            failed = by_name["nsys"] if not by_name["nsys"].ok else by_name["nsys report"]
            how = "under torch.profiler (chosen where no nsys is found)" if not by_name["nsys"].ok else \
                "with --backend torch (torch.profiler)"
            result[command] = (True, f"runs your script {how} and analyses the trace; {failed.name}: {failed.detail}")
        else:
            result[command] = (True, does)
    return result
