"""The command line: a thin click layer over the click-free core."""

from __future__ import annotations

import sys
from functools import wraps

import click

from . import __version__
from .errors import CgAdviseError

FINDINGS = ("launch-bound", "sync-bound")  # verdicts that exit 1: there is something to fix


def one_line_errors(command):
    """Bad input ends with one line on stderr and the error's exit code, never a traceback."""

    @wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CgAdviseError as error:
            click.echo(f"cg-advise: error: {error}", err=True)
            sys.exit(error.exit_code)

    return wrapper


@click.group()
@click.version_option(__version__, prog_name="cg-advise")
def cli():
    """Tells from a real Nsight Systems profile whether CUDA Graphs will speed up a PyTorch loop.

    Exit codes: 0 nothing to fix, 1 findings (launch- or sync-bound), 2 bad input,
    3 Nsight Systems missing or failing.
    """


@cli.command()
@click.argument("report", type=click.Path(path_type=str))
@click.option("--iteration-range", "pattern", metavar="REGEX",
              help="NVTX ranges that mark one iteration (default: cg-advise's own, else any repeated top-level range).")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON (schema cg-advise.analysis/1).")
@click.option("--ranges", "max_ranges", default=12, show_default=True, help="NVTX ranges shown in the table.")
@click.option("--nsys", "nsys_path", metavar="PATH", help="nsys used to export a .nsys-rep (default: $NSYS, PATH, /opt/nvidia).")
@click.option("--reexport", is_flag=True, help="Export a .nsys-rep again although an older .sqlite exists (kept as .bak).")
@one_line_errors
def analyze(report, pattern, as_json, max_ranges, nsys_path, reexport):
    """Analyse REPORT, an exported .sqlite or a .nsys-rep: gaps, utilization, launch cost,
    syncs, per iteration and per NVTX range, and a verdict."""
    from .analysis import analyse
    from .nsys import sqlite_for
    from .report import console, render, to_json
    from .trace import open_trace

    analysis = analyse(open_trace(sqlite_for(report, nsys_path, reexport)), pattern)
    if as_json:
        click.echo(to_json(analysis))
    else:
        render(analysis, console(), max_ranges)
    sys.exit(1 if analysis.main.summary.verdict in FINDINGS else 0)


def main():
    cli()


if __name__ == "__main__":
    main()
