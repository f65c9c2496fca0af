"""Renderers: an Analysis as rich tables for people, or as versioned JSON for tools."""

from __future__ import annotations

import json
import math
import sys

from rich.console import Console
from rich.table import Table

from .analysis import Analysis
from .predict import eager_source_text

VERDICT_STYLE = {"launch-bound": "bold red", "sync-bound": "bold yellow", "gpu-bound": "bold green",
                 "graphed": "bold green"}


def to_json(analysis: Analysis) -> str:
    return json.dumps(finite(analysis.to_dict()), indent=2)


def finite(value):
    """JSON has no NaN or infinity: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def console(file=None) -> Console:
    file = file or sys.stdout
    terminal = file.isatty() if hasattr(file, "isatty") else False
    return Console(file=file, width=None if terminal else 120, highlight=False, soft_wrap=False)


def render(analysis: Analysis, out: Console, max_ranges: int = 12) -> None:
    main = analysis.main
    s = main.summary
    t = analysis.trace
    out.print(f"[bold]{t['path']}[/]  {t['profiler']}, graph trace: {t['graph_trace_mode']}")
    others = len(analysis.groups) - 1
    out.print(f"process {main.pid} ({main.process or '?'}) on GPU {main.device} ({main.gpu or '?'})"
              + (f"; {others} other process/GPU pair(s) listed below" if others else ""))
    out.print(f"iterations: {s.iterations} from {s.iteration_source}", markup=False)
    if len(s.iteration_candidates) > 1 or (s.iteration_candidates and s.iteration_source.startswith("whole run")):
        out.print("  ranges considered (share of GPU time their calls launch; a range must launch half and be one "
                  "training step): " + ", ".join(f"{c['range']!r} {c['gpu_share']:.0%}" + (
                      f" ({c['not_iterations']})" if c.get("not_iterations") else "")
                      for c in s.iteration_candidates[:5]), markup=False)
    out.print(f"verdict: [{VERDICT_STYLE.get(s.verdict, 'bold')}]{s.verdict}[/]")
    for reason in s.reasons:
        out.print(f"  - {reason}")

    table = Table(title="Per iteration (median)", title_justify="left")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("GPU period", f"{s.gpu_period_ms:.3f} ms"),
        ("GPU busy (ideal graphed time)", f"{s.gpu_busy_ms_per_iteration:.3f} ms"),
        ("GPU utilization", f"{s.gpu_utilization:.1%}"),
        ("bound on speedup (traced)", f"{s.bound_speedup:.2f}x"),
        ("kernels", f"{s.kernels_per_iteration:.0f}"),
        ("GPU operations", f"{s.gpu_ops_per_iteration:.0f}"),
        ("launch gaps", f"{s.gaps_per_iteration:.0f} ({s.gap_ms_per_iteration:.3f} ms)"),
        ("launch API time", f"{s.launch_api_ms_per_iteration:.3f} ms"),
        ("launch call, median", f"{s.launch_api_median_us:.1f} us"),
        ("launch-to-start, median / p90", f"{s.launch_to_start_median_us:.1f} / {s.launch_to_start_p90_us:.1f} us"),
        ("kernel duration, median", f"{s.kernel_median_us:.1f} us"),
        ("kernels under 10 / 50 us", f"{s.kernel_share_under_10us:.0%} / {s.kernel_share_under_50us:.0%}"),
        ("host syncs", f"{s.syncs_per_iteration:.0f} ({s.sync_ms_per_iteration:.3f} ms)"),
        ("graph launches", f"{s.graph_launches_per_iteration:.0f}"),
        ("GPU time in graphs", f"{s.graphed_share:.0%}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)

    out.print(f"launch gaps inside iterations: {s.gaps.count}, {s.gaps.total_ms:.3f} ms; "
              f"p50 {s.gaps.p50_us:.1f} us, p90 {s.gaps.p90_us:.1f} us, p99 {s.gaps.p99_us:.1f} us")
    gaps = Table()
    for label in s.gaps.histogram:
        gaps.add_column(label, justify="right")
    gaps.add_row(*(str(v) for v in s.gaps.histogram.values()))
    out.print(gaps)

    if s.sync_calls:
        out.print("host syncs inside iterations: " + ", ".join(f"{k} x{v}" for k, v in s.sync_calls.items()))

    if main.ranges:
        ranges = Table(title="NVTX ranges (median per call)", title_justify="left")
        for column, justify in (("range", "left"), ("calls", "right"), ("kernels", "right"),
                                ("GPU busy ms", "right"), ("GPU span ms", "right"), ("CPU ms", "right"),
                                ("util", "right"), ("syncs", "right"), ("verdict", "left")):
            ranges.add_column(column, justify=justify)
        for r in main.ranges[:max_ranges]:
            ranges.add_row(r.name, str(r.calls), f"{r.kernels_per_call:.0f}", f"{r.gpu_busy_ms_per_call:.3f}",
                           f"{r.gpu_span_ms_per_call:.3f}", f"{r.cpu_ms_per_call:.3f}", f"{r.gpu_utilization:.0%}",
                           f"{r.syncs_per_call:.0f}", f"[{VERDICT_STYLE.get(r.verdict, '')}]{r.verdict}[/]")
        out.print(ranges)
        if len(main.ranges) > max_ranges:
            out.print(f"({len(main.ranges) - max_ranges} more ranges in --json)")

    if analysis.predictions:
        _render_predictions(analysis.predictions, out)

    if others:
        groups = Table(title="Every process and GPU", title_justify="left")
        for column in ("pid", "GPU", "iterations", "period ms", "busy ms", "util", "verdict"):
            groups.add_column(column)
        for g in analysis.groups:
            gs = g.summary
            groups.add_row(str(g.pid), str(g.device), str(gs.iterations), f"{gs.gpu_period_ms:.3f}",
                           f"{gs.gpu_busy_ms_per_iteration:.3f}", f"{gs.gpu_utilization:.0%}", gs.verdict)
        out.print(groups)


def _render_predictions(predictions: dict, out: Console) -> None:
    if "note" in predictions:
        out.print(f"predictions: {predictions['note']}")
        return
    out.print(f"eager iteration {predictions['eager_ms']:.3f} ms ({eager_source_text(predictions)}); bound for any graph "
              f"{predictions['bound']:.2f}x")
    calibration = predictions.get("calibration")
    if calibration:
        figures = ", ".join(f"{label} {calibration[key]:.2f} us" for key, label in (
            ("eager_launch_us", "eager launch"), ("graph_node_us", "graph node"), ("graph_launch_us", "graph launch"),
            ("helper_overhead_us", "full-iteration helper"), ("step_edges_us", "step edges"),
            ("capturable_step_us", "capturable optimizer step"))
            if isinstance(calibration.get(key), (int, float)))
        out.print(f"calibrated on {calibration['gpu']} (driver {calibration.get('driver') or '?'}, torch "
                  f"{calibration.get('torch') or '?'}){': ' + figures if figures else ''}")
    table = Table(title="Predicted speedup (untraced, 80 % interval), each scope as patch applies it",
                  title_justify="left")
    for column, justify in (("scope", "left"), ("speedup", "right"), ("interval", "right"), ("ms/iter", "right"),
                            ("note", "left")):
        table.add_column(column, justify=justify)
    for scope, p in predictions.items():
        if isinstance(p, dict) and "speedup" in p:
            interval = f"{p['low']:.2f}-{p['high']:.2f}x" if p.get("low") is not None else "-"
            widened = ("" if not p.get("interval_basis") else "interval widened" if p.get("caveat")
                       else "interval widened: a short baseline")
            note = "; ".join(filter(None, (p.get("as_applied", "") or (
                "not validated: no measurements of it" if p.get("unvalidated") else ""), p.get("caveat"), widened)))
            table.add_row(scope, f"{p['speedup']:.2f}x", interval, f"{p['ms']:.3f}", note)
        elif isinstance(p, dict) and "refused" in p:
            table.add_row(scope, "-", "-", "-", f"patch refuses it: {p['refused']}")
    out.print(table)
    out.print(f"advice: [bold]{predictions['advice']}[/]")


def render_evaluation(results: dict, out: Console) -> None:
    table = Table(title="Leave-one-family-out cross-validation (predicted vs tune's measured speedup)",
                  title_justify="left")
    for column in ("scope", "workloads", "median |log err|", "within 20 %", "time ±20 %", "±20 % on tune's eager",
                   "in 80 % interval", "Spearman", "go/no-go", "no-go called"):
        table.add_column(column, justify="right", min_width=14 if column == "scope" else None)
    for scope, r in results.items():
        if scope in ("verdict", "baseline") or not r["workloads"]:
            continue
        table.add_row(scope, str(r["workloads"]), _fixed(r["median_abs_log_error"]), _share(r["within_20_percent"]),
                      _share(r["time_within_20_percent"]), _share(r["within_20_percent_same_eager"]),
                      _share(r["interval_coverage"]), _fixed(r["spearman"]), _share(r["go_nogo_accuracy"]),
                      f"{r['nogo_called_nogo']}/{r['nogo_workloads']}")
    out.print(table)
    compile_ = results.get("compile") or {}
    if compile_.get("workloads"):   # compile's own target is looser: fusion varies more than a graph's replay
        out.print(f"compile within 25 %: {_share(compile_['within_25_percent'])} of {compile_['workloads']} workloads")
    v = results["verdict"]
    out.print(f"'graphs help' per workload (best graph scope): {_share(v['accuracy'])} right; no-go called no-go "
              f"{v['nogo_called_nogo']}/{v['nogo_workloads']}, go called go {v['go_called_go']}/{v['go_workloads']}")
    b = results.get("baseline") or {}
    if b.get("workloads"):
        out.print(f"profile's untraced baseline vs tune's eager timing: median |log err| "
                  f"{b['median_abs_log_error']:.3f}, within 10 % for {b['within_10_percent']:.0%} of "
                  f"{b['workloads']} workloads; the eager time predictions divide within 20 % of tune's for "
                  f"{_share(b['eager_within_20_percent'])}")
    out.print("time ±20 %: the scope's ms/iteration within 20 % of tune's; ±20 % on tune's eager: the speedup had the "
              "profile timed eager as tune did (what is left of the error when two processes' eager timings agree)")


def _share(value) -> str:
    """A share as a percentage; '-' where there was nothing to count (nan)."""
    return f"{value:.0%}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def _fixed(value) -> str:
    """A figure to 3 decimals; '-' where there was too little to compute it (nan)."""
    return f"{value:.3f}" if isinstance(value, (int, float)) and math.isfinite(value) else "-"


def render_tune(saved: dict, rows: list, spreads: dict, out: Console) -> None:
    winner = saved["winner"]
    unit = "model call" if (saved.get("step") or {}).get("kind") == "inference" else "training step"
    runs = f", median of {saved['runs']} runs" if (saved.get("runs") or 1) > 1 else ""
    if not runs and any(len(row.get("paired_runs") or row.get("run_ms") or []) > 1 for row in saved["rows"]):
        runs = ", where a scope ran in several processes their median"
    table = Table(title=f"Capture scopes of {saved['script']} (ms per {unit}, untraced{runs})", title_justify="left")
    for column in ("scope", "ms/iter", "speedup", "overhead recovered", "extra MB", "correctness", "status"):
        table.add_column(column, justify="left" if column in ("scope", "correctness", "status") else "right")
    for row in rows:
        style = "bold green" if row[0] == winner else None
        table.add_row(*row, style=style)
    out.print(table)
    if spreads:
        counts = {processes for _, processes in spreads.values()}
        mixed = len(counts) > 1   # tune.runs_for: a scope timed in one pair runs in more processes
        of = "of its processes" if mixed else f"of {counts.pop()} processes"
        out.print(f"between runs (slowest/fastest {of}): "
                  + ", ".join(f"{scope} {spread:.2f}x" + (f" ({processes})" if mixed else "")
                              for scope, (spread, processes) in spreads.items())
                  + "; timings closer than that are within this machine's noise")
    if saved.get("gpu_busy_ms"):
        out.print(f"GPU-busy bound: {saved['gpu_busy_ms']:.3f} ms/{unit} "
                  f"({saved['eager_ms'] / saved['gpu_busy_ms']:.2f}x at most)")
    for row in saved["rows"]:
        if row.get("measured_ms") and row.get("paired_speedup") and row.get("paired_eager_ms") and row.get("speedup"):
            from tuner.search import eager_slowdown   # the tuner's figure; tune results only come from it

            gain = row["paired_speedup"] / eager_slowdown(row["scope"])
            floor = (f", held at the iteration's GPU-busy time ({saved['gpu_busy_ms']:.3f} ms/{unit})"
                     if saved.get("gpu_busy_ms") and row["speedup"] < gain * 0.999 else "")
            out.print(f"{row['scope']}: timed paired, graphed and eager windows alternating in its own process "
                      f"({row['measured_ms']:.3f} and {row['paired_eager_ms']:.3f} ms/{unit} there, "
                      f"{row['paired_speedup']:.2f}x; {gain:.2f}x with graphing's slowdown of the eager "
                      f"windows taken out): its ms/iter is eager's over that speedup{floor}")
        failure = row.get("failure")
        if failure and failure.get("fix"):
            at = f" at {failure['where']}" if failure.get("where") else ""
            out.print(f"{row['scope']}: {failure['kind']}{at}: {failure.get('message', '')}; {failure['meaning']}; "
                      f"fix: {failure['fix']}")
        elif failure:
            out.print(f"{row['scope']}: {failure.get('kind')}: {failure.get('message', '')}")
        elif row.get("note"):
            out.print(f"{row['scope']}: note: {row['note']}")
    if saved.get("note"):
        out.print(saved["note"])
    step = (saved.get("step") or {}).get("step_name")
    out.print(f"winner: [bold]{winner}[/]" + ("" if winner == "eager" else
              f"; apply with `cg-advise patch {saved['script']}" + (f" --step {step}" if step else "") + "`"))
