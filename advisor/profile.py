"""`cg-advise profile`: the user's script, unmodified, under Nsight Systems with NVTX injected,
or under torch.profiler (the torch backend: where no nsys is installed).

prepare() checks everything it can before the GPU is touched and builds the exact command;
run() runs it, streaming the script's output to stderr, then exports an nsys report. The
torch backend runs the same bootstrap with ``CG_ADVISE_KINETO_TRACE``: the same ranges as
``record_function`` ranges, the same window, and the Chrome trace beside the run record.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from .errors import CgAdviseError
from .sourcefile import read_source
from .nsys import Nsys, NsysError, export_sqlite, find_nsys

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
PYTHON_NAME = re.compile(r"^python[0-9.]*$")
REQUIRED_TRACES = ("cuda", "nvtx")
# nsys's own lines in the combined output, told apart from the script's
NSYS_LINE = re.compile(r"^(Collecting data\.\.\.|Generating '|\[\d+/\d+\]|Generated:|\s+\S+\.(nsys-rep|qdstrm|sqlite)$|"
                       r"Processing \[|Capture range|WARNING: CPU |The target application terminated|"
                       r"Stopping data collection|Signal \d+ received)")


DEFAULT_WARMUP = 50       # untraced iterations before recording; the second half, and as many after, the timed baseline
                          # (late enough to miss a slow start: lazy loading, clocks, allocator growth)
DEFAULT_ITERATIONS = 20   # iterations recorded
RUN_RECORD = ".cg-advise-run.json"   # beside the report: what profile measured outside the trace
KINETO_TRACE = ".kineto.json.gz"     # the torch backend's report: torch.profiler's Chrome trace, gzipped
NSYS, TORCH = "nsys", "torch"     # --backend (and auto)
BACKEND_NAMES = {NSYS: "nsys", TORCH: "torch.profiler"}   # as the analysis and the run record name them


class NoCudaError(CgAdviseError):
    exit_code = 4


class ScriptFailed(CgAdviseError):
    exit_code = 5


class Interrupted(CgAdviseError):
    exit_code = 130


class WindowNeverOpened(CgAdviseError):
    """The script ended before its recording window opened (``iterations``: how many it ran)."""

    def __init__(self, message: str, iterations: int) -> None:
        super().__init__(message)
        self.iterations = iterations


MIN_SHRUNK_ITERATIONS = 10   # a script this short or longer gets a window of its own length, run again


def shrunk_window(iterations_run: int) -> Optional[tuple]:
    """(warmup, iterations) that fit a script that ran ``iterations_run`` iterations, the timed
    stretch after the window included (half the warm-up): 40 % warm-up, 20 % recorded, 20 %
    timed after; None for a script too short to time (under MIN_SHRUNK_ITERATIONS)."""
    if iterations_run < MIN_SHRUNK_ITERATIONS:
        return None
    return max(4, iterations_run * 2 // 5), max(2, iterations_run // 5)


@dataclass
class Target:
    """What to run: an interpreter, its own flags, and ``script.py args`` or ``-m module args``;
    under a distributed launcher, the launcher and its arguments with the bootstrap in them."""

    python: str
    python_flags: list
    argv: list            # ["train.py", ...] or ["-m", "pkg", ...]; the launcher's own under one
    launcher: list = field(default_factory=list)   # ["torchrun"] or [python, "-m", "torch.distributed.run"]
    script: str = ""      # the user's script or module

    def __post_init__(self):
        if not self.script:
            self.script = self.argv[1] if self.argv[0] == "-m" else self.argv[0]

    @property
    def label(self) -> str:
        return self.script


BOOTSTRAP = ["-m", "advisor.inject"]   # before each worker's script under a launcher
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")
LAUNCHER_FLAGS = {"--standalone", "--run-path", "--run_path"}   # torchrun options that take no value


def inject_workers(argv: list) -> tuple:
    """torchrun's arguments with the NVTX bootstrap put before each worker's script:
    ``[opts] train.py args`` -> ``[opts] -m advisor.inject train.py args`` (``-m pkg`` too).
    Returns (arguments, the user's script or module)."""
    options, i, module = [], 0, False
    while i < len(argv) and argv[i].startswith("-"):
        arg = argv[i]
        i += 1
        if arg in ("-m", "--module"):
            module = True
        elif arg in ("--no-python", "--no_python"):
            raise CgAdviseError("torchrun --no-python runs no Python: cg-advise needs a Python script or module")
        else:
            options.append(arg)
            if "=" not in arg and arg not in LAUNCHER_FLAGS and i < len(argv):
                options.append(argv[i])
                i += 1
    rest = argv[i:]
    if not rest:
        raise CgAdviseError("nothing for the launcher to run: give a script or -m module")
    if module and rest[0] == "advisor.inject":  # named by hand already
        user = rest[1:]
        script = user[1] if user[:1] == ["-m"] and len(user) > 1 else (user[0] if user else rest[0])
        return options + ["-m", *rest], script
    if not module:
        check_script(Path(rest[0]))
    return options + BOOTSTRAP + (["-m"] if module else []) + rest, rest[0]


def split_launcher(target: Target) -> tuple:
    """(the launcher with its own arguments, each worker's ``script.py args``) of a target run
    under torchrun: tune puts its harness where profile puts the NVTX bootstrap."""
    at = next((i for i in range(len(target.argv)) if target.argv[i:i + 2] == BOOTSTRAP), None)
    if not target.launcher or at is None:
        return [], list(target.argv)
    return [*target.launcher, *target.argv[:at]], target.argv[at + 2:]


def window(warmup: Optional[int], iterations: Optional[int], run_to_end: bool, whole_run: bool) -> tuple:
    """(warmup, iterations) for the profile options: a window by default, so that every
    profile carries an untraced baseline timed in its warm-up and after its recording;
    ``--whole-run`` records all."""
    if whole_run:
        given = [flag for flag, value in (("--warmup", warmup), ("--iterations", iterations),
                                          ("--run-to-end", run_to_end or None)) if value is not None]
        if given:
            raise CgAdviseError(f"--whole-run records every iteration: it takes no {given[0]}")
        return None, None
    return (DEFAULT_WARMUP if warmup is None else warmup), (DEFAULT_ITERATIONS if iterations is None else iterations)


@dataclass
class ProfileOptions:
    output: Path                      # report path without extension
    trace: str = "cuda,nvtx"
    graph_trace: str = "graph"
    sample_cpu: bool = False
    warmup: Optional[int] = None
    iterations: Optional[int] = None
    run_to_end: bool = False
    force: bool = False
    backend: str = NSYS
    wait_for_baseline: bool = True    # False: the window opens after --warmup even with CG_ADVISE_BASELINE_BEFORE

    @property
    def windowed(self) -> bool:
        return self.iterations is not None


@dataclass
class ProfileRun:
    command: list
    env: dict
    report: Path
    sqlite: Path
    summary_file: Path
    target: Target
    returncode: int = 0
    output_tail: deque = field(default_factory=lambda: deque(maxlen=20))
    interrupted: bool = False
    injected: dict = field(default_factory=dict)   # what the NVTX bootstrap counted
    window: tuple = ()                             # (warmup, iterations) when windowed
    backend: str = NSYS

    @property
    def trace_file(self) -> Path:
        """The file the analysis reads: nsys's SQLite export, or the torch backend's trace."""
        return self.sqlite if self.backend == NSYS else self.report

    @property
    def tool(self) -> str:
        return BACKEND_NAMES[self.backend]


def parse_target(args: list, python: str = sys.executable, command_name: str = "profile") -> Target:
    """``train.py [args]`` or ``python [flags] (-m module | script.py) [args]``."""
    if not args:
        if command_name != "profile":
            raise CgAdviseError(f"no script given: cg-advise {command_name} [OPTIONS] train.py [ARGS]...")
        raise CgAdviseError("no script given: cg-advise profile [OPTIONS] train.py [ARGS]... "
                            "or cg-advise profile [OPTIONS] -- python -m module [ARGS]...")
    first = args[0]
    if Path(first).name == "torchrun":
        argv, script = inject_workers(list(args[1:]))
        return Target(python, [], argv, launcher=[first], script=script)
    if PYTHON_NAME.match(Path(first).name):
        flags, rest = [], list(args[1:])
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            if rest[0] == "-c":
                raise CgAdviseError("python -c is not supported: put the code in a script")
            flags.append(rest.pop(0))
        if not rest or (rest[0] == "-m" and len(rest) < 2):
            raise CgAdviseError(f"nothing to run after {first}: give a script or -m module")
        if rest[0] == "-m" and rest[1] in LAUNCHER_MODULES:
            argv, script = inject_workers(rest[2:])
            return Target(first, flags, argv, launcher=[first, *flags, "-m", rest[1]], script=script)
        target = Target(first, flags, rest)
    else:
        target = Target(python, [], list(args))
    if target.argv[0] != "-m":
        check_script(Path(target.argv[0]))
    return target


def check_script(path: Path) -> None:
    if not path.exists():
        raise CgAdviseError(f"{path}: no such file")
    if path.is_dir():
        raise CgAdviseError(f"{path}: is a folder, not a Python script")
    source = read_source(path).raw   # unreadable, binary, huge or undecodable: one clear line
    try:
        compile(source, str(path), "exec")
    except (SyntaxError, ValueError) as error:
        where = f" at line {error.lineno}" if getattr(error, "lineno", None) else ""
        raise CgAdviseError(f"{path}: not a Python script ({type(error).__name__}{where})") from None


def check_output(options: ProfileOptions) -> list:
    """The report's folder must be writable; existing reports are kept unless --force, which
    first moves them to ``.bak``. Returns the backups made."""
    folder = options.output.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CgAdviseError(f"cannot create output folder {folder}: {error.strerror}") from None
    if not os.access(folder, os.W_OK):
        raise CgAdviseError(f"output folder {folder} is not writable")
    existing = [p for p in report_files(options.output, options.backend) if p.exists()]
    if existing and not options.force:
        raise CgAdviseError(f"{existing[0]} exists: pass --force to replace it (kept as {existing[0].name}.bak) "
                            "or choose another --output")
    backups = []
    for path in existing:
        backup = path.with_name(path.name + ".bak")
        path.replace(backup)
        backups.append(backup)
    return backups


def report_files(output: Path, backend: str = NSYS) -> list:
    """The files a profile writes: nsys's report and export, or the torch backend's trace;
    the run record last."""
    record = output.with_name(output.name + RUN_RECORD)
    if backend == TORCH:
        return [output.with_name(output.name + KINETO_TRACE), record]
    return [output.with_name(output.name + ".nsys-rep"), output.with_name(output.name + ".sqlite"), record]


# the endings of the files a run record sits beside, longest first
REPORT_ENDINGS = (KINETO_TRACE, ".json.gz", ".json", ".sqlite", ".nsys-rep")


def run_record_path(report) -> Path:
    """The run record beside a report, its export or a torch trace (``name.sqlite``,
    ``name.kineto.json.gz`` -> ``name.cg-advise-run.json``)."""
    report = Path(report)
    ending = next((e for e in REPORT_ENDINGS if report.name.endswith(e) and report.name != e), "")
    return report.with_name(report.name[:len(report.name) - len(ending)] + RUN_RECORD)


def choose_backend(backend: str, nsys_path: Optional[str], nsys_options: list, find=find_nsys) -> tuple:
    """(backend, Nsys or None, a note for stderr or None). ``auto`` is nsys when a usable one
    is found, else torch.profiler, said so; nsys is required when asked for by name, by
    --nsys, or by an option only nsys has (those are refused with --backend torch)."""
    if backend == TORCH:
        given = nsys_options + (["--nsys"] if nsys_path else [])
        if given:
            raise CgAdviseError(f"{given[0]} is an Nsight Systems option: --backend torch takes none")
        return TORCH, None, None
    if backend == NSYS or nsys_path or nsys_options:
        return NSYS, find(nsys_path), None
    try:
        return NSYS, find(None), None
    except NsysError as error:
        return TORCH, None, (f"{str(error).split(': ')[0]}: profiling with torch.profiler instead "
                             "(--backend torch; --backend nsys to insist)")


def trace_list(trace: str) -> str:
    parts = [p.strip() for p in trace.split(",") if p.strip()]
    for needed in REQUIRED_TRACES:
        if needed not in parts:
            parts.append(needed)
    return ",".join(parts)


def nsys_command(nsys: Nsys, options: ProfileOptions, target: Target) -> list:
    command = [nsys.path, "profile", "-t", trace_list(options.trace), f"--cuda-graph-trace={options.graph_trace}"]
    if options.sample_cpu:
        command += ["-s", "cpu", "--cpuctxsw=process-tree"]
    else:
        command += ["-s", "none", "--cpuctxsw=none"]
    if options.windowed:
        command += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    command += ["-o", str(options.output), "--force-overwrite", "true" if options.force else "false"]
    if target.launcher:  # the bootstrap runs in each worker, not around the launcher
        return command + target.launcher + target.argv
    return command + bootstrap_command(target)


def bootstrap_command(target: Target) -> list:
    """The user's interpreter running the script under the bootstrap (advisor/inject.py)."""
    return [target.python, *target.python_flags, *BOOTSTRAP, *target.argv]


def importable_env(environ=os.environ) -> dict:
    """The environment in which the user's interpreter finds this package (the NVTX bootstrap,
    the calibration), their own PYTHONPATH kept after it."""
    env = dict(environ)
    env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def torch_command(target: Target) -> list:
    """The bootstrap alone: it records with torch.profiler itself (CG_ADVISE_KINETO_TRACE)."""
    if target.launcher:
        raise CgAdviseError("--backend torch profiles one process: under a distributed launcher use nsys "
                            "(--backend nsys), or profile one rank's script directly")
    return bootstrap_command(target)


SECONDS_SETTINGS = ("CG_ADVISE_BASELINE_SECONDS", "CG_ADVISE_BASELINE_BEFORE")   # read by the bootstrap


def check_seconds_settings(environ=os.environ) -> None:
    """The bootstrap reads these in the user's process, where a bad value would end the script
    with a traceback: refused here, before anything runs, in one line."""
    for name in SECONDS_SETTINGS:
        value = environ.get(name)
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds >= 0):
            raise CgAdviseError(f"{name}={value!r}: not a number of seconds (0 or more)")


def child_env(options: ProfileOptions, summary_file: Path, environ=os.environ) -> dict:
    check_seconds_settings(environ)
    env = importable_env(environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["CG_ADVISE_SUMMARY"] = str(summary_file)
    if options.backend == TORCH:
        env["CG_ADVISE_KINETO_TRACE"] = str(report_files(options.output, TORCH)[0])
    if options.windowed:
        env["CG_ADVISE_WARMUP"] = str(options.warmup or 0)
        env["CG_ADVISE_ITERATIONS"] = str(options.iterations)
        env["CG_ADVISE_RUN_TO_END"] = "1" if options.run_to_end else "0"
        if not options.wait_for_baseline:
            env["CG_ADVISE_BASELINE_BEFORE"] = "0"
    return env


def check_cuda(python: str, command_name: str = "profile") -> None:
    """The target interpreter must see a CUDA device (its torch, not ours)."""
    probe = "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        result = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NoCudaError(f"cannot check for a CUDA device with {python}: {error}") from None
    if result.returncode != 0:
        why = "torch is not installed" if "ModuleNotFoundError" in result.stderr else "torch.cuda.is_available() is False"
        raise NoCudaError(f"no CUDA device visible to {python} ({why}): {command_name} on a machine with an "
                          "NVIDIA GPU")


def prepare(nsys: Optional[Nsys], options: ProfileOptions, target: Target) -> ProfileRun:
    """The run to make: under nsys, or (``nsys`` None, the torch backend) the bootstrap alone."""
    torch_backend = options.backend == TORCH
    command = torch_command(target) if torch_backend else nsys_command(nsys, options, target)
    summary_file = Path(tempfile.mkstemp(prefix="cg-advise-", suffix=".json")[1])
    files = report_files(options.output, options.backend)
    report, sqlite = (files[0], files[0]) if torch_backend else files[:2]
    window = (options.warmup or 0, options.iterations) if options.windowed else ()
    return ProfileRun(command, child_env(options, summary_file), report, sqlite, summary_file, target,
                      window=window, backend=options.backend)


def run(profile: ProfileRun, nsys: Optional[Nsys], echo: Callable[[str], None]) -> ProfileRun:
    """Runs nsys (or the torch backend's bootstrap), echoing each line of the script's output;
    Ctrl-C stops nsys, which still writes what it collected (the bootstrap writes the trace
    of the window so far). Then exports an nsys report to SQLite."""
    process = subprocess.Popen(profile.command, env=profile.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, errors="replace", bufsize=1, start_new_session=True)
    try:
        _relay(process, profile, echo)
    except KeyboardInterrupt:
        # nsys (or the bootstrap) runs in its own session, out of the terminal's reach: tell
        # it, and it stops the script and still writes what it collected
        profile.interrupted = True
        process.send_signal(signal.SIGINT)
        try:
            _relay(process, profile, echo)
        except KeyboardInterrupt:
            os.killpg(process.pid, signal.SIGKILL)
    profile.returncode = process.wait()
    profile.injected = read_summary(profile)
    if not profile.report.exists():
        raise _no_report(profile)
    if profile.backend == NSYS:
        export_sqlite(nsys, profile.report, profile.sqlite)
    return profile


def _relay(process, profile: ProfileRun, echo) -> None:
    for line in process.stdout:
        line = line.rstrip("\n")
        if line.strip() and not NSYS_LINE.match(line):
            profile.output_tail.append(line)
        echo(line)
    process.wait()


def script_tail(profile: ProfileRun, lines: int = 1) -> str:
    """The script's last output lines (nsys's own left out): a traceback's last line says why."""
    return " | ".join(list(profile.output_tail)[-lines:])


def _no_report(profile: ProfileRun) -> CgAdviseError:
    tail = list(profile.output_tail)
    qdstrm = list(profile.report.parent.glob(profile.report.stem + "*.qdstrm"))
    tool = profile.tool
    if profile.interrupted:
        return Interrupted(f"interrupted before {tool} wrote a report")
    done = profile.injected.get("iterations")
    if profile.window and done is not None and done <= profile.window[0]:
        return WindowNeverOpened(f"{profile.target.label} ran {done} iterations, not more than --warmup "
                                 f"{profile.window[0]}: the recording window never opened (give a smaller "
                                 "--warmup, or --whole-run to record the whole script)", done)
    # past the warm-up, and still no window: it waited for CG_ADVISE_BASELINE_BEFORE
    if profile.window and done is not None and profile.injected.get("window_opened_at", 0) is None:
        return WindowNeverOpened(f"{profile.target.label} ran {done} iterations, all of them before the recording "
                                 "window, which waited for CG_ADVISE_BASELINE_BEFORE seconds of untraced steps: it "
                                 "never opened (lower or unset CG_ADVISE_BASELINE_BEFORE)", done)
    if qdstrm and profile.backend == NSYS:
        return NsysError(f"nsys left only {qdstrm[0].name}: its importer failed (on Linux it needs libdw.so.1 "
                         "from elfutils on LD_LIBRARY_PATH), or profile with --backend torch")
    if profile.returncode != 0 and tail:
        return ScriptFailed(f"{profile.target.label} exited with code {profile.returncode} and {tool} wrote no report; "
                            f"last output: {tail[-1]}")
    if profile.backend == TORCH:
        return CgAdviseError(f"torch.profiler wrote no trace: {profile.target.label} ran no iteration the bootstrap "
                             f"could see{' (last output: ' + tail[-1] + ')' if tail else ''}")
    return NsysError(f"nsys wrote no report{': ' + tail[-1] if tail else ''}")


def read_summary(profile: ProfileRun) -> dict:
    import json

    try:
        return json.loads(profile.summary_file.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    finally:
        profile.summary_file.unlink(missing_ok=True)
