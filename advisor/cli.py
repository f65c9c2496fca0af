"""The command line: a thin click layer over the click-free core."""

from __future__ import annotations

import os
import sys
from functools import wraps

import click

from . import __version__
from .errors import CgAdviseError
from .runrecord import DEFAULT_BASELINE_RUNS

FINDINGS = ("launch-bound", "sync-bound")  # verdicts that exit 1: there is something to fix


def one_line_errors(command):
    """Bad input ends with one line on stderr and the error's exit code, never a traceback:
    our own errors, and the ones any file or option can raise (unreadable or undecodable
    files, damaged JSON, source libcst cannot parse). Anything else is a bug of ours: still one
    line, exit 2, and ``CG_ADVISE_DEBUG=1`` shows the traceback."""

    @wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CgAdviseError as error:
            _fail(str(error), error.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except Exception as error:  # noqa: BLE001 - the one place that turns any error into one line
            import os

            if os.environ.get("CG_ADVISE_DEBUG") == "1":
                raise
            _fail(describe_error(error), 2)

    return wrapper


def describe_error(error: Exception) -> str:
    """One line for an error that escaped the checks, naming the file when there is one."""
    import json

    if isinstance(error, OSError):
        where = f"{error.filename}: " if error.filename else ""
        return f"{where}{error.strerror or error}"
    if isinstance(error, ImportError):
        return (f"a package cg-advise needs is missing ({error.name or error}): install cg-advise with its "
                "dependencies (pip install cg-advise)")
    if isinstance(error, UnicodeError):
        return f"cannot decode or encode text ({error})"
    if isinstance(error, json.JSONDecodeError):
        return f"damaged JSON ({error.msg} at line {error.lineno})"
    try:
        import libcst

        if isinstance(error, libcst.ParserSyntaxError):
            return f"not a Python script ({error.message} at line {error.raw_line})"
    except ImportError:
        pass
    first = str(error).strip().splitlines()
    return (f"unexpected {type(error).__name__}: {first[0] if first else 'no message'} "
            "(please report it; CG_ADVISE_DEBUG=1 shows the traceback)")


def _fail(message: str, code: int):
    click.echo(f"cg-advise: error: {' '.join(message.split()) if message else 'failed'}", err=True)
    sys.exit(code)


class OneLineErrors(click.Group):
    """click's own usage errors (a bad option value, a missing argument) as one line on
    stderr with exit 2, like every other bad input, instead of usage text and a box."""

    def main(self, *args, standalone_mode=True, **kwargs):
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            returned = super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.NoArgsIsHelpError as error:   # `cg-advise` alone: the help, as usual
            error.show()
            sys.exit(error.exit_code)
        except click.ClickException as error:
            command = error.ctx.command_path if getattr(error, "ctx", None) else "cg-advise"
            _fail(f"{error.format_message()} (see `{command} --help`)", error.exit_code)
        except click.exceptions.Abort:
            _fail("interrupted", 130)
        sys.exit(returned if isinstance(returned, int) else 0)


@click.group(cls=OneLineErrors)
@click.version_option(__version__, prog_name="cg-advise")
def cli():
    """Tells from a real Nsight Systems (or torch.profiler) profile whether CUDA Graphs will speed up a PyTorch loop.

    Exit codes: 0 nothing to fix, 1 findings (launch- or sync-bound), 2 bad input,
    3 Nsight Systems missing or failing.
    """


@cli.command()
@click.argument("report", type=click.Path(path_type=str))
@click.option("--iteration-range", "pattern", metavar="REGEX",
              help="NVTX ranges that mark one iteration (default: cg-advise's own, else any repeated top-level range).")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON (schema cg-advise.analysis/2).")
@click.option("--ranges", "max_ranges", default=12, show_default=True, type=click.IntRange(min=0),
              help="NVTX ranges shown in the table.")
@click.option("--nsys", "nsys_path", metavar="PATH", help="nsys used to export a .nsys-rep (default: $NSYS, PATH, /opt/nvidia).")
@click.option("--reexport", is_flag=True, help="Export a .nsys-rep again although an older .sqlite exists (kept as .bak).")
@click.option("--model", "model_path", metavar="PATH", help="Benefit model JSON (default: the shipped H100 model).")
@click.option("--html", "html_path", metavar="FILE", help="Also write an offline HTML report: timeline, iterations, "
              "gaps, ranges, predictions.")
@click.option("--perfetto", "perfetto_path", metavar="FILE", help="Also write the analysed iterations as a Chrome "
              "trace JSON (Perfetto, chrome://tracing), with the iteration windows and gaps as tracks.")
@click.option("--force", is_flag=True, help="Replace an existing --html or --perfetto file.")
@one_line_errors
def analyze(report, pattern, as_json, max_ranges, nsys_path, reexport, model_path, html_path, perfetto_path, force):
    """Analyse REPORT, an exported .sqlite, a .nsys-rep, or a torch.profiler (Kineto) trace
    (.json, .json.gz): gaps, utilization, launch cost, syncs, per iteration and per NVTX range,
    a verdict, and the predicted speedup of each capture scope."""
    from .report import console, render, to_json

    targets = _visual_targets(html_path, perfetto_path, force, report)
    analysis, trace = _analysis_of(report, model_path, pattern, nsys_path, reexport)
    if as_json:
        click.echo(to_json(analysis))
    else:
        render(analysis, console(), max_ranges)
    _write_visuals(targets, analysis, trace, report)
    sys.exit(1 if analysis.main.summary.verdict in FINDINGS else 0)


def _visual_targets(html_path, perfetto_path, force, source=None) -> dict:
    """The --html / --perfetto files, checked before any work (an existing one needs --force,
    the two never one file; no Perfetto file of a torch.profiler trace, which already is one)."""
    from .visual import NO_PERFETTO_OF_CHROME_TRACE, check_target, is_chrome_trace

    targets = {}
    if html_path:
        targets["html"] = check_target(html_path, force, "--html")
    if perfetto_path:
        if source is not None and is_chrome_trace(source):
            raise CgAdviseError(NO_PERFETTO_OF_CHROME_TRACE)
        targets["perfetto"] = check_target(perfetto_path, force, "--perfetto")
        if "html" in targets and targets["html"].resolve() == targets["perfetto"].resolve():
            raise CgAdviseError(f"--html and --perfetto both name {perfetto_path}: give two files")
    return targets


def _write_visuals(targets: dict, analysis, trace, source: str, tune=None, diff=None) -> None:
    from .visual import size_note, write_html, write_perfetto

    if "html" in targets:
        size = write_html(targets["html"], analysis, trace, tune, diff, str(source))
        _note(f"wrote {targets['html']} ({size_note(size)})")
    if "perfetto" in targets:
        size, events = write_perfetto(targets["perfetto"], analysis, trace, str(source))
        _note(f"wrote {targets['perfetto']} ({events} events, {size / 1e6:.2f} MB; open it in ui.perfetto.dev)")


@cli.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
@click.option("-o", "--output", "output", metavar="NAME", help="Report name, without extension (default: cg-advise-<script>).")
@click.option("--output-dir", type=click.Path(file_okay=False, path_type=str), default=".", show_default=True,
              help="Folder of the report.")
@click.option("--force", is_flag=True, help="Replace an existing report (the old one is kept as .bak).")
@click.option("--warmup", type=click.IntRange(min=0), help="Iterations run untraced before recording starts; the "
              "second half of them, and as many after the recording (more, up to 3 s in all), are timed as the eager "
              "baseline.  [default: 50]")
@click.option("--iterations", type=click.IntRange(min=1), help="Iterations to record, then (after the baseline's second stretch) stop the script.  "
              "[default: 20]")
@click.option("--run-to-end", is_flag=True, help="Let the script finish after the recorded iterations.")
@click.option("--baseline-runs", type=click.IntRange(min=0), metavar="N",
              help="Also time the eager loop as tune does, in N fresh processes without a profiler (each stopped "
                   "after 110 steps, or what a shorter script has; up to 600 s each), and predict from their median; "
                   "0: predict from the profiled process's own baseline, timed under the profiler.  [default: "
                   f"{DEFAULT_BASELINE_RUNS} where this GPU was calibrated, else 0]")
@click.option("--whole-run", is_flag=True, help="Record the whole script instead (no untraced baseline in the profiled "
              "process: the eager time then comes from --baseline-runs, estimated with 0).")
@click.option("--backend", type=click.Choice(["auto", "nsys", "torch"]), default="auto", show_default=True,
              help="Record with Nsight Systems, or with torch.profiler (Kineto; no nsys needed); auto: nsys when a "
                   "usable one is found, else torch.")
@click.option("-t", "--trace", help="nsys -t list (cuda and nvtx are always added).  [default: cuda,nvtx]")
@click.option("--cuda-graph-trace", type=click.Choice(["graph", "node"]),
              help="nsys: one range per graph replay, or every graph node (slower).  [default: graph]")
@click.option("--sample-cpu", is_flag=True, help="nsys: turn on CPU sampling and context switches (large reports).")
@click.option("--nsys", "nsys_path", metavar="PATH", help="nsys to use (default: $NSYS, PATH, /opt/nvidia, /usr/local/cuda*).")
@click.option("--iteration-range", "pattern", metavar="REGEX", help="As for analyze.")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON.")
@click.option("--model", "model_path", metavar="PATH", help="Benefit model JSON (default: the shipped H100 model).")
@click.option("--html", "html_path", metavar="FILE", help="Also write an offline HTML report of the analysis "
              "(an existing file is replaced only with --force).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@one_line_errors
def profile(output, output_dir, force, warmup, iterations, run_to_end, baseline_runs, whole_run, backend, trace, cuda_graph_trace,
            sample_cpu, nsys_path, pattern, as_json, model_path, html_path, command):
    """Run a script under Nsight Systems (or torch.profiler) with ranges around its iterations
    and submodules, then analyse the report.

    \b
    cg-advise profile [OPTIONS] train.py [SCRIPT_ARGS]...
    cg-advise profile [OPTIONS] -- python -m package [ARGS]...

    By default the first --warmup iterations run untraced (the second half of them timed:
    the eager baseline of the prediction), the next --iterations are recorded, as many
    iterations as were timed run untraced and timed again (more, until 3 s are timed, where
    the script runs that long), and the script is stopped. On a GPU the eager loop is then
    timed as tune times it, in --baseline-runs fresh processes without a profiler, and the
    prediction divides their median.
    Beside the report, NAME.cg-advise-run.json keeps that baseline, a few seconds'
    calibration of this GPU, and the capture scopes as `patch` would apply them.
    With --backend torch (or no nsys found) the report is NAME.kineto.json.gz, torch.profiler's
    Chrome trace, which `analyze` reads too.

    Exit codes: 0/1 as analyze, 2 bad input, 3 nsys missing/too old/failing (with --backend
    nsys, --nsys or an nsys option), 4 no CUDA device, 5 the script failed (its partial report is analysed), 130 interrupted.
    """
    from pathlib import Path

    from . import profile as prof
    from . import runrecord
    import os

    from .analysis import analyse
    from .memory import keep_freed_memory
    from .predict import load_model, predictions_for
    from .report import console, render, to_json
    from .trace import open_trace

    targets = _visual_targets(html_path, None, force)
    model = load_model(model_path)
    warmup_given, iterations_given = warmup, iterations
    warmup, iterations = prof.window(warmup, iterations, run_to_end, whole_run)
    target = prof.parse_target(list(command))
    prof.check_seconds_settings()   # before anything runs or a previous report is moved aside
    name = output or f"cg-advise-{Path(target.script).stem if target.script.endswith('.py') else target.script}"
    nsys_options = [flag for flag, given in (("-t/--trace", trace is not None), ("--sample-cpu", sample_cpu),
                                             ("--cuda-graph-trace", cuda_graph_trace is not None)) if given]
    backend, nsys, why = prof.choose_backend(backend, nsys_path, nsys_options)
    if why:
        _note(why)
    options = prof.ProfileOptions(Path(output_dir) / name, trace or "cuda,nvtx", cuda_graph_trace or "graph",
                                  sample_cpu, warmup, iterations, run_to_end, force, backend)
    if backend == prof.TORCH:
        prof.torch_command(target)   # refused under a launcher before anything runs
    if backend == prof.NSYS or os.environ.get("CG_ADVISE_ALLOW_NO_CUDA") != "1":  # test-only escape hatch
        prof.check_cuda(target.python)
    for backup in prof.check_output(options):
        _note(f"kept the previous {backup.stem} as {backup.name}")
    run = prof.prepare(nsys, options, target)
    if nsys:
        _note(f"nsys {nsys.version}: {' '.join(run.command)}")
    else:
        _note(f"torch.profiler: CG_ADVISE_KINETO_TRACE={run.report} {' '.join(run.command)}")
    with _progress(f"profiling {target.label} under {run.tool}") as echo:
        try:
            run = prof.run(run, nsys, echo)
        except prof.WindowNeverOpened as error:
            # a script shorter than the default window: profiled again with a window that fits
            # it; a window the user chose is theirs to change. One that ran past the warm-up
            # while the window waited for CG_ADVISE_BASELINE_BEFORE: again, the window not waiting
            waited = options.wait_for_baseline and error.iterations > (options.warmup or 0)
            shrunk = prof.shrunk_window(error.iterations) if warmup_given is None and iterations_given is None else None
            if waited:
                echo(f"cg-advise: {target.label} ran {error.iterations} iterations, all of them before the recording "
                     "window opened (CG_ADVISE_BASELINE_BEFORE): profiling it again, the window opening after the "
                     "warm-up")
                options.wait_for_baseline = False
            elif shrunk is None:
                raise
            else:
                echo(f"cg-advise: {target.label} ran {error.iterations} iterations, fewer than the default warm-up "
                     f"({options.warmup}): profiling it again with --warmup {shrunk[0]} --iterations {shrunk[1]}")
                options.warmup, options.iterations = shrunk
                options.wait_for_baseline = False   # a script this short has no seconds to wait for
            run = prof.run(prof.prepare(nsys, options, target), nsys, echo)
        echo("cg-advise: calibrating this GPU (a few seconds)")
        calibrated = runrecord.calibration(target.python, runrecord.capturable_specs(run.injected))
    if "error" in calibrated:
        _note(f"calibration: {calibrated['error']}; the prediction uses the fitting GPU's constants")
    applied = None
    if target.argv[0] != "-m":
        applied = runrecord.applied_scopes(target.script)
    bare = None
    if baseline_runs is None:
        baseline_runs, why = runrecord.default_baseline_runs(calibrated, target, applied,
                                                             runrecord.measured_eager_ms(run.injected) or 0.0)
        if why:
            _note(why)
    if baseline_runs and (run.interrupted or run.returncode != 0):
        _note("eager loop in fresh processes: not timed, the profiled run did not complete")
    elif baseline_runs:
        _note(f"timing the eager loop in {baseline_runs} fresh processes without a profiler "
              "(Ctrl-C skips them, --baseline-runs 0 too)")
        bare = runrecord.bare_baseline(target, applied, baseline_runs)
        if "error" in bare:
            instead = ("the profiled process's own baseline" if (run.injected or {}).get("untraced")
                       else "the eager time estimated from the trace")
            _note(f"eager loop in fresh processes: {bare['error']}; the prediction uses {instead}")
        else:
            _note(f"eager, {bare['runs']} bare processes: " + ", ".join(f"{ms:.3f}" for ms in bare["run_ms"])
                  + f" ms/iteration (median {bare['ms_per_iteration']:.3f})")
    record = runrecord.build(target, run.injected, run.window, calibrated, applied, prof.BACKEND_NAMES[backend],
                             bare)
    record_path = prof.run_record_path(run.report)
    runrecord.write(record_path, record)
    if backend == prof.NSYS:
        _note(f"report: {run.report}  export: {run.sqlite}  run record: {record_path.name}")
    else:
        _note(f"trace: {run.report}  run record: {record_path.name}")
    keep_freed_memory()
    opened = open_trace(run.trace_file)
    analysis = analyse(opened, pattern)
    analysis.predictions = predictions_for(analysis, model, record)
    if as_json:
        click.echo(to_json(analysis))
    else:
        render(analysis, console())
    _write_visuals(targets, analysis, opened, str(run.report))
    if run.interrupted:
        raise prof.Interrupted(f"interrupted: the partial report {run.report} was analysed")
    if run.returncode != 0:
        raise prof.ScriptFailed(f"{target.label} exited with code {run.returncode} (partial report analysed); "
                                f"last output: {prof.script_tail(run)}")
    sys.exit(1 if analysis.main.summary.verdict in FINDINGS else 0)


@cli.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
@click.option("--scopes", metavar="S,...", help="Capture scopes to try (default: all of the loop's kind: "
              "full_iteration,fwd_bwd,submodule,compile for training, forward,compile for inference; "
              "a DDP loop also full_iteration_allreduce_outside).")
@click.option("--exhaustive", is_flag=True, help="Also try scopes the model predicts hopeless.")
@click.option("--step", metavar="[MODULE:]FUNCTION", help="The function whose loop is the step, e.g. train or "
              "Trainer.fit (default: found in the whole script).")
@click.option("--trace", "report", metavar="REPORT", help="An eager profile (.sqlite/.nsys-rep): its predictions order "
              "the candidates and its GPU busy time gives the bound.")
@click.option("--model", "model_path", metavar="PATH", help="Benefit model JSON (default: the shipped H100 model).")
@click.option("--budget", "budget_s", default=900.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds for all candidates.")
@click.option("--warmup", default=10, show_default=True, type=click.IntRange(min=1), help="Training steps before timing.")
@click.option("--iterations", default=100, show_default=True, type=click.IntRange(min=1),
              help="Training steps timed, in --repeats windows (ms/iteration is their median).")
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(min=1), help="Timed windows.")
@click.option("--min-time", "min_seconds", default=3.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds to time at least: past --iterations, windows of the same size go on while the script "
                   "runs (a host's launch speed drifts from second to second; 0: stop where --iterations end, paired "
                   "timing where its windows pair up).")
@click.option("--runs", type=click.IntRange(min=1),
              help="Processes per candidate, ms/iteration their median (use 5, with as many --iterations as the "
                   "script allows, for loops with host work: their timing varies from process to process; the "
                   "spread is printed). Default: 1, and 3 for a scope timed in one pair of windows (a script "
                   "too short for long paired windows).")
@click.option("--cpus", metavar="LIST", help="Pin every candidate to these CPUs, e.g. 0-3 (steadier host timing).")
@click.option("--no-pairing", "no_pairing", is_flag=True,
              help="Time fwd_bwd, submodule and full_iteration in their own process only, against the eager process (by default "
                   "their process alternates graphed and eager windows and the speedup is their ratio: a host's "
                   "speed moves from process to process).")
@click.option("--check-steps", default=5, show_default=True, type=click.IntRange(min=1),
              help="Steps after which parameters are compared with eager.")
@click.option("--tolerance", default=1e-3, show_default=True, type=click.FloatRange(min=0),
              help="Max relative parameter difference vs eager.")
@click.option("--keep-workdir", is_flag=True, help="Keep each candidate's measurement and parameter snapshot "
              "(a cg-advise-tune-* folder in the temporary directory; removed by default).")
@click.option("--json", "as_json", is_flag=True, help="Print the tune result as JSON.")
@click.option("--apply", "apply_", is_flag=True, help="Patch the script with the winner (the original kept as .orig).")
@click.option("--html", "html_path", metavar="FILE", help="Also write an offline HTML report: measured vs predicted "
              "per scope, the winner's patch, and with --trace the profile's analysis.")
@click.option("--force", is_flag=True, help="Replace an existing --html file.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@one_line_errors
def tune(scopes, exhaustive, step, report, model_path, budget_s, warmup, iterations, repeats, min_seconds, runs, cpus,
         no_pairing, check_steps, tolerance, keep_workdir, as_json, apply_, html_path, force, command):
    """Run eager and each capture scope of SCRIPT on this GPU, each in its own process, check
    them against eager, and rank them; the result is saved beside the script for `patch`.

    \b
    cg-advise tune [OPTIONS] train.py [SCRIPT_ARGS]...
    cg-advise tune [OPTIONS] -- torchrun --nproc-per-node 2 train.py [SCRIPT_ARGS]...

    Under torchrun every candidate runs on all ranks: the time is the slowest rank's, and
    every rank's parameters are compared with eager's. The script must run at least warmup + iterations steps (training steps, or model calls
    of an inference loop). Exit codes: 0 eager is
    best (or --apply done), 1 a faster scope is ready to patch, 2 bad input, 4 no CUDA device.
    """
    import json
    import os
    from pathlib import Path

    from tuner.harness import Settings
    from tuner.tune import TuneOptions, find_step, parse_scopes, result_table_rows, run_spreads
    from tuner.tune import tune as run_tune

    from . import profile as prof
    from .report import console, render_tune

    targets = _visual_targets(html_path, None, force)
    target = prof.parse_target(list(command), command_name="tune")
    launcher, worker = prof.split_launcher(target)
    if worker[0] == "-m":
        raise CgAdviseError("tune needs a script file, not a module (its training loop is rewritten per scope)")
    if launcher and cpus:
        raise CgAdviseError("--cpus pins one process; under torchrun the ranks would share those CPUs: leave it out")
    options = TuneOptions(scopes=parse_scopes(scopes), exhaustive=exhaustive,
                          budget_s=budget_s, settings=Settings(warmup=warmup, iterations=iterations,
                                                               repeats=repeats, min_seconds=min_seconds,
                                                               check_steps=check_steps,
                                                               cpus=_cpu_list(cpus)),
                          tolerance=tolerance, runs=runs, step=step, keep_workdir=keep_workdir,
                          python=target.python, launcher=launcher, paired=not no_pairing)
    script = Path(worker[0])
    spec = find_step(script, options)   # everything that needs no GPU is checked before the CUDA probe
    profiled = None
    if report:
        profiled = _analysis_of(report, model_path)
        analysis = profiled[0]
        options.predictions = analysis.predictions if "note" not in analysis.predictions else None
        options.gpu_busy_ms = analysis.main.summary.gpu_busy_ms_per_iteration
    if os.environ.get("CG_ADVISE_ALLOW_NO_CUDA") != "1":  # test-only escape hatch
        prof.check_cuda(target.python, "tune")
    with _progress(f"tuning {target.label}") as echo:
        saved = run_tune(script, worker[1:], options, lambda line: echo(f"cg-advise: {line}"), spec)
    if as_json:
        click.echo(json.dumps(saved, indent=2))
    else:
        render_tune(saved, result_table_rows(saved), run_spreads(saved), console())
    if targets:
        from .visual import winner_diff

        analysis, opened = profiled or (None, None)
        _write_visuals(targets, analysis, opened, report or script, saved, winner_diff(saved))
    if apply_ and saved["winner"] != "eager":
        from .patching import run_patch

        _, note = run_patch(str(script), None, True, step)
        _note(note)
        sys.exit(0)
    sys.exit(0 if saved["winner"] == "eager" else 1)


def _cpu_list(text):
    from tuner.harness import parse_cpus

    try:
        return parse_cpus(text)
    except ValueError:
        raise CgAdviseError(f"--cpus {text!r}: expected a list such as 0-3,8") from None


def _analysis_of(report, model_path, pattern=None, nsys_path=None, reexport=False):
    """(analysis with its predictions, the opened trace) of a profile: an export, a report
    (exported first) or a torch.profiler trace, with the run record beside it if any."""
    from .analysis import analyse
    from .nsys import sqlite_for
    from .predict import load_model, predictions_for
    from .memory import keep_freed_memory
    from .runrecord import read_beside
    from .trace import open_trace

    model = load_model(model_path)
    keep_freed_memory()
    trace = open_trace(sqlite_for(report, nsys_path, reexport))
    analysis = analyse(trace, pattern)
    analysis.predictions = predictions_for(analysis, model, read_beside(report))
    return analysis, trace


@cli.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("-o", "--output", "output", required=True, metavar="FILE", help="The HTML file to write.")
@click.option("--force", is_flag=True, help="Replace an existing output file.")
@click.option("--iteration-range", "pattern", metavar="REGEX", help="As for analyze.")
@click.option("--model", "model_path", metavar="PATH", help="Benefit model JSON (default: the shipped H100 model).")
@click.option("--nsys", "nsys_path", metavar="PATH", help="nsys used to export a .nsys-rep (default: $NSYS, PATH, /opt/nvidia).")
@one_line_errors
def report_command(results, output, force, pattern, model_path, nsys_path):
    """Write one offline HTML report of RESULTS: a profile (.sqlite or .nsys-rep) and/or a
    tune result (`tune --json`, or the SCRIPT.cg-advise.json tune saves beside the script).

    \b
    cg-advise report cg-advise-train.sqlite train.py.cg-advise.json -o report.html

    Exit codes: 0 written, 2 bad input."""
    from pathlib import Path

    from .visual import check_target, split_results, winner_diff

    targets = {"html": check_target(output, force, "-o/--output")}
    profile_path, tune = split_results(results)
    analysis, trace = _analysis_of(profile_path, model_path, pattern, nsys_path) if profile_path else (None, None)
    saved = tune[1] if tune else None
    diff = winner_diff(saved, Path(tune[0]).parent) if tune else None
    _write_visuals(targets, analysis, trace, " + ".join(results), saved, diff)


@cli.command("patch")
@click.argument("script", type=click.Path(path_type=str))
@click.option("--scope", type=click.Choice(["submodule", "fwd_bwd", "full_iteration",
                                            "full_iteration_allreduce_outside", "compile", "forward"]),
              help="Force a scope (default: the winner of the saved tune result).")
@click.option("--step", metavar="[MODULE:]FUNCTION", help="The function whose loop to rewrite (default: the "
              "tune result's, else found in the whole script).")
@click.option("--apply", "apply_", is_flag=True, help="Write the change (the original is kept as SCRIPT.orig).")
@one_line_errors
def patch_command(script, scope, step, apply_):
    """Print (or --apply) the change that makes SCRIPT's training loop use a capture scope,
    as a unified diff that `git apply` and `patch -p1` accept.

    Exit codes: 0 applied, 1 a diff was printed (a pending change), 2 refused."""
    from .patching import run_patch

    diff, note = run_patch(script, scope, apply_, step)
    if diff:
        click.echo(diff, nl=False)
    _note(note)
    sys.exit(0 if apply_ else 1)


@cli.group()
def model():
    """Fit and evaluate the benefit model on your own GPU's measurements."""


@model.command("fit")
@click.argument("dataset", type=click.Path(path_type=str))
@click.option("-o", "--output", default="cg-advise-model.json", show_default=True, help="Model JSON to write.")
@click.option("--force", is_flag=True, help="Replace an existing model file (the old one is kept as .bak).")
@click.option("--provenance", default="", help="Where the measurements come from (GPU, driver, torch).")
@one_line_errors
def model_fit(dataset, output, force, provenance):
    """Fit a model on DATASET.csv (the columns of advisor/data/dataset_h100.csv, from
    bench/collect_dataset.py and bench/build_dataset.py on your GPU); use it with --model."""
    import json
    from pathlib import Path

    from .predict import fit, read_dataset
    from .sourcefile import atomic_write

    rows = read_dataset(dataset)
    target = Path(output)
    if target.is_dir():
        raise CgAdviseError(f"{target}: is a folder; give the model file's name with -o")
    if target.exists() and not force:
        raise CgAdviseError(f"{target} exists: pass --force to replace it (kept as {target.name}.bak)")
    fitted = fit(rows, provenance or f"fitted on {dataset}")
    text = json.dumps(fitted, indent=1) + "\n"
    if target.exists():
        atomic_write(target.with_name(target.name + ".bak"), target.read_bytes())
    atomic_write(target, text.encode("utf-8"))
    fitted_scopes = [scope for scope, residual in fitted["residuals"].items() if residual]
    _note(f"wrote {target}: {len(rows)} workloads; residual fitted for {', '.join(fitted_scopes) or 'no scope'}")


@model.command("eval")
@click.argument("dataset", required=False, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@one_line_errors
def model_eval(dataset, as_json):
    """Leave-one-family-out cross-validation on DATASET.csv of the model `model fit` makes of
    it: predicted against tune's measured speedups. DATASET may also name a shipped dataset:
    h100 (the default, the shipped model's) or h200."""
    import json

    from .predict import SHIPPED_DATASETS, cross_validate, read_dataset, residual_choice, shipped_dataset
    from .report import console, finite, render_evaluation

    if dataset is None or (dataset in SHIPPED_DATASETS and not os.path.exists(dataset)):   # a file of that name wins
        rows = shipped_dataset(dataset or "h100")
    else:
        rows = read_dataset(dataset)
    results = cross_validate(rows, residual_choice(rows))   # the model `model fit` would make of it
    if as_json:
        click.echo(json.dumps(finite({s: {k: v for k, v in r.items() if k != "log_residuals"}
                                       for s, r in results.items()}), indent=2, allow_nan=False, default=str))
    else:
        render_evaluation(results, console())


@cli.command()
@click.option("--python", "python", default=sys.executable, show_default="this Python", metavar="PATH",
              help="The interpreter that runs your script (its torch and GPU are checked).")
@click.option("--nsys", "nsys_path", metavar="PATH", help="nsys to check (default: $NSYS, PATH, /opt/nvidia, /usr/local/cuda*).")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON (schema cg-advise.doctor/1).")
@one_line_errors
def doctor(python, nsys_path, as_json):
    """Check torch, CUDA, the GPU and nsys (that it can write and export a report), and say what
    each command can do on this machine: a failed profile or tune is costly to find out about
    halfway, so this says up front what is missing and how to get it.

    Exit codes: 0 every command can run here, 1 some cannot (findings), 2 bad input."""
    import json
    from dataclasses import asdict

    from .doctor import capabilities, run_checks

    checks = run_checks(python, nsys_path, note=_note)
    commands = capabilities(checks)
    if as_json:
        click.echo(json.dumps({"schema": "cg-advise.doctor/1", "checks": [asdict(check) for check in checks],
                               "commands": {name: {"ok": ok, "reason": reason}
                                            for name, (ok, reason) in commands.items()}}, indent=2))
    else:   # plain lines, not rich: the doctor must work when rich itself is missing
        width = max(len(name) for name in [c.name for c in checks] + list(commands))
        click.echo("checks")
        for check in checks:
            click.echo(f"  {({True: 'ok', False: 'FAIL', None: 'n/a'})[check.ok]:<5} {check.name:<{width}}  {check.detail}")
            if check.fix:
                click.echo(f"  {'':<5} {'':<{width}}  fix: {check.fix}")
        click.echo("\nwhat each command can do here")
        for name, (ok, reason) in commands.items():
            click.echo(f"  {'yes' if ok else 'no':<5} {name:<{width}}  {reason}")
    sys.exit(0 if all(ok for ok, _ in commands.values()) else 1)


def _progress(title: str):
    """A spinner with the elapsed time on a terminal's stderr, lines printed above it;
    plain lines when stderr is not a terminal."""
    import contextlib

    if not sys.stderr.isatty():
        return contextlib.nullcontext(lambda line: click.echo(line, err=True))
    from rich.console import Console

    console = Console(stderr=True)

    @contextlib.contextmanager
    def status():
        with console.status(title):
            yield lambda line: console.print(line, markup=False, highlight=False)

    return status()


def _note(message: str) -> None:
    click.echo(f"cg-advise: {message}", err=True)


def main():
    cli()


if __name__ == "__main__":
    main()
