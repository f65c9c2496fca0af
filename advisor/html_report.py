"""The analysis (and a tune result) as one self-contained HTML page: inline SVG plots with
hover text, a little vanilla JavaScript to zoom the timeline, no network.

It draws the figures the console report prints (the same Analysis and tune result objects);
only the timeline reads events again, from the export, for a few iterations
(advisor/timeline.py). Every plot answers what a table of medians cannot: where the GPU
waits, whether the run is steady, how the gaps and kernels are spread, which range loses
the time, and how the predictions sit against the physical bound and the measurement.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from . import __version__
from .analysis import Analysis
from .predict import GO_DECISION, eager_source_text
from .svg import esc, fmt_us, line, log_ticks, nice_step, num, rect, text
from .timeline import Timeline

MAX_ITERATION_BARS = 600     # the per-iteration plot bins longer runs (median per bin)
MAX_RANGE_BARS = 15
LANE_H, LANE_GAP = 14, 3
SCOPES = ("full_iteration", "fwd_bwd", "submodule", "compile", "forward")


def render_html(analysis: Optional[Analysis], timeline: Optional[Timeline], tune: Optional[dict] = None,
                diff: Optional[str] = None, source: str = "") -> str:
    """The page; ``analysis`` and ``timeline`` come from a profile, ``tune`` from a tune
    result (either may be missing, not both), ``diff`` is the winner's patch."""
    parts = []
    if analysis is not None:
        parts.append(_header(analysis))
        if timeline is not None:
            parts.append(_timeline_section(timeline, analysis))
        elif analysis.main.iterations:
            parts.append('<p class="q">No event-by-event timeline: it is drawn from Nsight Systems exports; '
                         'open a torch.profiler trace in Perfetto to see its events.</p>')
        parts.append(_iterations_section(analysis))
        parts.append(_distributions_section(analysis))
        parts.append(_ranges_section(analysis))
        parts.append(_predictions_section(analysis.predictions, tune))
    if tune is not None:
        parts.append(_tune_section(tune, diff, analysis is None))
    title = f"cg-advise report: {source}" if source else "cg-advise report"
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><main>\n<h1>{esc(title)}</h1>\n" + "\n".join(parts)
            + f"\n<footer>cg-advise {esc(__version__)}: one file, no network; the plots are inline SVG "
            f"(hover for values), the timeline zooms with the wheel and pans by dragging.</footer>"
            f"</main><script>{JS}</script></body></html>\n")


def _section(ident: str, title: str, question: str, body: str) -> str:
    return (f'<section id="{ident}"><h2>{esc(title)}</h2><p class="q">{esc(question)}</p>{body}</section>')


def _header(analysis: Analysis) -> str:
    main, s, t = analysis.main, analysis.main.summary, analysis.trace
    p = analysis.predictions or {}
    best = p.get(p.get("best") or "", {}) if isinstance(p.get("best"), str) else {}
    tiles = [
        ("verdict", s.verdict, f"v-{s.verdict}"),
        ("GPU busy per iteration", f"{s.gpu_busy_ms_per_iteration:.3f} ms", ""),
        ("traced iteration (GPU period)", f"{s.gpu_period_ms:.3f} ms", ""),
        ("GPU utilization", f"{s.gpu_utilization:.0%}", ""),
        ("bound on speedup (traced)", f"{s.bound_speedup:.2f}x", ""),
    ]
    if "eager_ms" in p:
        measured = str(p.get("eager_source", "")).startswith("measured")
        tiles.append((f"{'untraced' if measured else 'estimated'} eager / bound",
                      f"{p['eager_ms']:.3f} ms / {p['bound']:.2f}x", ""))
    if best.get("speedup"):
        tiles.append((f"best scope predicted: {p['best']}", f"{best['speedup']:.2f}x", ""))
    tile_html = "".join(f'<div class="tile {cls}"><div class="k">{esc(k)}</div><div class="v">{esc(v)}</div></div>'
                        for k, v, cls in tiles)
    reasons = "".join(f"<li>{esc(r)}</li>" for r in s.reasons)
    advice = p.get("advice") or p.get("note") or ""
    others = len(analysis.groups) - 1
    recorder = t.get("profiler") or f"nsys {t['nsys_version']}"
    return (f'<section id="summary"><p class="meta">{esc(t["path"])}: {esc(recorder)}, '
            f"graph trace {esc(t['graph_trace_mode'])}; process {main.pid} ({esc(main.process or '?')}) on GPU "
            f"{main.device} ({esc(main.gpu or '?')}){f'; {others} other process/GPU pair(s) not drawn' if others else ''}"
            f"; {s.iterations} iterations from {esc(s.iteration_source)}</p>"
            f'<div class="tiles">{tile_html}</div>'
            + (f'<p class="advice">advice: {esc(advice)}</p>' if advice else "")
            + f"<ul class=\"reasons\">{reasons}</ul></section>")


# ---- timeline -------------------------------------------------------------------------------

READINGS = {   # what the timeline of each verdict looks like, to read it by
    "launch-bound": "Here the GPU waits: short kernels separated by red, each started as soon as the CPU's "
                    "launch call returns; a graph replays them without the gaps.",
    "gpu-bound": "Here the GPU is busy back to back and the CPU runs ahead of it (its calls end long before "
                 "their kernels run): a graph cannot make the kernels faster.",
    "sync-bound": "Here the CPU blocks in host syncs (red calls) and the GPU drains meanwhile.",
    "graphed": "Here each iteration is already a graph replay (purple).",
}
TIMELINE_CLASSES = {"kernel": "ek", "memcpy": "em", "memset": "es", "graph": "eg", "launch": "cl",
                    "graph_launch": "cg", "sync": "cs", "call": "cc", "nvtx": "en"}


def _timeline_section(tl: Timeline, analysis: Analysis) -> str:
    def us(ns):
        return ((ns - tl.start) / 1e3)
    rows, labels, y = [], [], 22
    width_us = us(tl.end)
    # iterations lane
    labels.append(text(4, y + 11, "iterations", "lab b"))
    iteration_rows = {row["index"]: row for row in analysis.main.iterations}
    for k, (index, a, b) in enumerate(tl.iterations):
        it = iteration_rows.get(index, {})
        rows.append(rect(us(a), y, us(b) - us(a), LANE_H, f"it it{k % 2}",
                         f"iteration {index}: GPU period {it.get('gpu_period_ms', 0):.3f} ms, "
                         f"GPU busy {it.get('gpu_busy_ms', 0):.3f} ms ({it.get('gpu_utilization', 0):.0%}), "
                         f"{it.get('kernels', 0)} kernels, {it.get('gaps', 0)} gaps"))
    y += LANE_H + LANE_GAP
    group, gpu_top = None, None
    for lane in tl.lanes:
        if lane.group != group:
            group = lane.group
            y += 6
            labels.append(text(4, y + 8, {"NVTX": "NVTX ranges", "CPU": "CPU: CUDA calls per thread",
                                          "GPU": "GPU: work per stream"}[group], "lab b"))
            y += 12
            if group == "GPU":
                gpu_top = y
        labels.append(text(12, y + 11, lane.name, "lab"))
        cls_default = TIMELINE_CLASSES
        for e in lane.events:
            dur_us = (e.end - e.start) / 1e3
            rows.append(rect(us(e.start), y, dur_us, LANE_H, cls_default.get(e.kind, "cc"),
                             f"{e.name}\n{fmt_us(dur_us)} ({e.kind.replace('_', ' ')}) at +{fmt_us(us(e.start))}"))
        y += LANE_H + LANE_GAP
    # GPU idle lane, and the gaps shaded behind every GPU lane
    labels.append(text(12, y + 11, "GPU idle (gaps)", "lab gapl"))
    shade = []
    for a, b in tl.gaps:
        gap_us = (b - a) / 1e3
        rows.append(rect(us(a), y, gap_us, LANE_H, "gap", f"GPU idle {fmt_us(gap_us)} at +{fmt_us(us(a))}"))
        if gpu_top is not None:
            shade.append(rect(us(a), gpu_top, gap_us, y - gpu_top, "shade"))
    y += LANE_H + LANE_GAP
    height = y + 4
    lines = [line(us(a), 0, us(a), height, "itline") for _, a, _ in tl.iterations]
    first, last = tl.iterations[0], tl.iterations[-1]
    init_x, init_w = us(first[1]), us(last[2]) - us(first[1])
    legend = "".join(f'<span class="sw {cls}"></span>{esc(label)} ' for cls, label in (
        ("ek", "kernel"), ("em", "memcpy"), ("es", "memset"), ("eg", "graph replay"), ("cl", "launch call"),
        ("cg", "graph launch"), ("cs", "host sync"), ("cc", "other CUDA call"), ("en", "NVTX range"),
        ("gap", "GPU idle")))
    left_out = ""
    if tl.left_out:
        left_out = (" The window was cut at the event cap: left out at least "
                    + ", ".join(f"{n} {kind}" for kind, n in sorted(tl.left_out.items())) + ".")
    shown = ", ".join(str(i) for i, _, _ in tl.iterations)
    reading = READINGS.get(analysis.main.summary.verdict, "")
    body = (f'<p class="note">Iterations {esc(shown)} of {tl.total_iterations} (the ones around the median '
            f"period), {tl.events} events.{esc(left_out)} Red is time the GPU sat idle inside an iteration. "
            f"{esc(reading)}</p>"
            f'<div class="legend">{legend}</div>'
            f'<div class="tlbar"><button data-act="in">zoom in</button><button data-act="out">zoom out</button>'
            f'<button data-act="reset">the iterations (GPU side)</button><button data-act="all">the whole window'
            f'</button> <span class="hint">wheel: zoom, drag: pan, double-click: reset</span></div>'
            f'<div class="tl"><svg class="labels" width="190" height="{height}">{"".join(labels)}</svg>'
            f'<div class="plotwrap"><svg class="axis" height="20" width="100%"></svg>'
            f'<svg class="plot" height="{height}" width="100%" preserveAspectRatio="none" '
            f'viewBox="{num(init_x)} 0 {num(max(init_w, 1e-3))} {height}" data-x0="0" data-w="{num(width_us)}" '
            f'data-ix="{num(init_x)}" data-iw="{num(max(init_w, 1e-3))}" data-h="{height}" '
            f'data-start-ns="{tl.start}" data-end-ns="{tl.end}">'
            f'{"".join(shade)}{"".join(lines)}{"".join(rows)}</svg></div></div>'
            f'<div class="readout">hover over an event for its name and duration</div>')
    return _section("timeline", "Timeline of representative iterations",
                    "Where does the GPU wait? CPU launch calls per thread, GPU work per stream, host syncs, "
                    "graph replays and NVTX ranges of the same iterations, on one clock.", body)


# ---- per iteration --------------------------------------------------------------------------

def _iterations_section(analysis: Analysis) -> str:
    rows = analysis.main.iterations
    s = analysis.main.summary
    if not rows:
        return ""
    period = np.array([r["gpu_period_ms"] for r in rows])
    busy = np.array([r["gpu_busy_ms"] for r in rows])
    index = np.array([r["index"] for r in rows])
    binned = len(rows) > MAX_ITERATION_BARS
    if binned:
        edges = np.linspace(0, len(rows), MAX_ITERATION_BARS + 1).astype(int)
        pieces = [(index[a], index[b - 1], np.median(period[a:b]), np.median(busy[a:b]))
                  for a, b in zip(edges[:-1], edges[1:]) if b > a]
    else:
        pieces = [(i, i, p, b) for i, p, b in zip(index, period, busy)]
    eager = (analysis.predictions or {}).get("eager_ms")
    # a warm-up iteration can be 100x the others: the axis stops at 1.5x the 90th percentile
    # and the bars above it are cut, with their value written on them
    top = max(min(float(period.max()), 1.5 * float(np.percentile(period, 90))), eager or 0) * 1.08 or 1.0
    w, h, left, bottom, right = 900, 260, 56, 28, 10
    pw, ph = w - left - right, h - bottom - 10
    bar = pw / len(pieces)
    def yv(ms):
        return (10 + ph * (1 - ms / top))
    parts = []
    step = nice_step(top)
    for k in range(int(top / step) + 1):
        parts.append(line(left, yv(k * step), w - right, yv(k * step), "grid"))
        parts.append(text(left - 4, yv(k * step) + 4, f"{k * step:g}", "tick", "end"))
    cuts = 0
    for j, (i0, i1, p, b) in enumerate(pieces):
        x = left + j * bar
        label = f"iteration {i0}" if i0 == i1 else f"iterations {i0}-{i1} (median)"
        tip = f"{label}: GPU period {p:.3f} ms, GPU busy {b:.3f} ms ({b / p if p else 0:.0%})"
        cut = p > top
        parts.append(rect(x, yv(min(p, top)), max(bar * 0.9, 0.5), yv(0) - yv(min(p, top)),
                          "period cut" if cut else "period", tip))
        parts.append(rect(x, yv(min(b, top)), max(bar * 0.9, 0.5), yv(0) - yv(min(b, top)), "busy", tip))
        if cut:
            cuts += 1
            parts.append(text(x + 2, 20 + 11 * (cuts % 3), f"{p:.3g} ms (cut)", "cutl"))
    parts.append(line(left, yv(s.gpu_busy_ms_per_iteration), w - right, yv(s.gpu_busy_ms_per_iteration), "limit",
                      f"physical limit: GPU busy {s.gpu_busy_ms_per_iteration:.3f} ms (median), a perfect graph"))
    parts.append(text(w - right - 4, yv(s.gpu_busy_ms_per_iteration) - 4,
                      f"physical limit {s.gpu_busy_ms_per_iteration:.3f} ms", "lim", "end"))
    if eager:
        parts.append(line(left, yv(eager), w - right, yv(eager), "eager", f"untraced eager iteration {eager:.3f} ms"))
        parts.append(text(left + 4, yv(eager) - 4, f"untraced eager {eager:.3f} ms", "eag"))
    parts.append(text(left + pw / 2, h - 6, "iteration" + (" (binned, median per bin)" if binned else ""), "tick",
                      "middle"))
    parts.append(text(12, 10 + ph / 2, "ms", "tick", "middle"))
    svg = f'<svg class="chart" viewBox="0 0 {w} {h}" width="100%">{"".join(parts)}</svg>'
    legend = ('<div class="legend"><span class="sw period"></span>GPU period (traced) <span class="sw busy"></span>'
              'GPU busy <span class="sw limit"></span>physical limit (median busy) '
              + ('<span class="sw eager"></span>untraced eager' if eager else "") + "</div>")
    return _section("iterations", "Every iteration: GPU busy against the period",
                    "Is the run steady? Warm-up, outliers and drift, and how far each iteration is from the "
                    "physical limit (the GPU busy time, what a perfect graph would leave).", legend + svg)


# ---- distributions --------------------------------------------------------------------------

def _histogram(values_us: np.ndarray, marks: list, title_unit: str, note: str) -> str:
    w, h, left, bottom = 440, 220, 44, 30
    pw, ph = w - left - 10, h - bottom - 34
    if len(values_us) == 0:
        return f'<svg class="chart" viewBox="0 0 {w} {h}" width="100%">{text(w / 2, h / 2, "none", "tick", "middle")}</svg>'
    lo = 10 ** math.floor(math.log10(max(float(values_us.min()), 0.1)))
    # the marks (the console's buckets, 10 and 50 us) always inside the axis
    hi = 10 ** math.ceil(math.log10(max(float(values_us.max()), lo * 10, max(v for v, _ in marks) * 1.5)))
    edges = np.logspace(math.log10(lo), math.log10(hi), int(round(math.log10(hi / lo))) * 5 + 1)
    counts, _ = np.histogram(np.clip(values_us, lo, hi), edges)
    sums, _ = np.histogram(np.clip(values_us, lo, hi), edges, weights=values_us)
    def xv(u):
        return (left + pw * math.log10(u / lo) / math.log10(hi / lo))
    top = max(int(counts.max()), 1)
    def yv(c):
        return (34 + ph * (1 - c / top))
    parts = []
    for k in range(len(counts)):
        if counts[k]:
            parts.append(rect(xv(edges[k]) + 0.5, yv(counts[k]), xv(edges[k + 1]) - xv(edges[k]) - 1,
                              yv(0) - yv(counts[k]), "hbar",
                              f"{fmt_us(edges[k])} to {fmt_us(edges[k + 1])}: {counts[k]} {title_unit}, "
                              f"{sums[k] / 1e3:.3f} ms in all"))
    for t in log_ticks(lo, hi):
        parts.append(text(xv(t), h - bottom + 14, fmt_us(t), "tick", "middle"))
    for k, (value, label) in enumerate(sorted(marks)):
        if lo <= value <= hi:
            parts.append(line(xv(value), 4 + 10 * (k % 2), xv(value), yv(0), "mark", label))
            parts.append(text(xv(value) + (2 if xv(value) < w - 60 else -2), 12 + 11 * (k % 2),
                              label, "markt", "start" if xv(value) < w - 60 else "end"))
    parts.append(line(left, yv(0), w - 10, yv(0), "axisl"))
    parts.append(text(left - 4, yv(top) + 4, str(top), "tick", "end"))
    parts.append(text(left - 4, yv(0), "0", "tick", "end"))
    return (f'<figure><svg class="chart" viewBox="0 0 {w} {h}" width="100%">{"".join(parts)}</svg>'
            f"<figcaption>{esc(note)}</figcaption></figure>")


def _distributions_section(analysis: Analysis) -> str:
    s, d = analysis.main.summary, analysis.main.distributions
    gaps_us = np.asarray(d.get("gap_ns", []), float) / 1e3
    kernels_us = np.asarray(d.get("kernel_ns", []), float) / 1e3
    histogram = ", ".join(f"{k}: {v}" for k, v in s.gaps.histogram.items())
    gap_note = (f"{s.gaps.count} gaps inside iterations, {s.gaps.total_ms:.3f} ms in all; p50 {s.gaps.p50_us:.1f} us, "
                f"p90 {s.gaps.p90_us:.1f} us, p99 {s.gaps.p99_us:.1f} us ({histogram}). Many gaps of a few us "
                f"between kernels are launch cost; a few long ones are the host doing other work (data, syncs, "
                f"logging).")
    kernel_note = (f"{len(kernels_us)} kernels, median {s.kernel_median_us:.1f} us; {s.kernel_share_under_10us:.0%} "
                   f"under 10 us, {s.kernel_share_under_50us:.0%} under 50 us. Kernels shorter than their launch "
                   f"call ({s.launch_api_median_us:.1f} us median) keep the GPU waiting for the CPU.")
    body = ('<div class="two">'
            + _histogram(gaps_us, [(5, "5 us"), (50, "50 us"), (1000, "1 ms")], "gaps", gap_note)
            + _histogram(kernels_us, [(10, "10 us"), (50, "50 us"), (s.launch_api_median_us, "launch call")],
                         "kernels", kernel_note) + "</div>")
    return _section("distributions", "Gap lengths and kernel durations",
                    "Are the gaps launch cost (many, short) or host work (few, long)? Are the kernels shorter "
                    "than the time it takes to launch one?", body)


# ---- NVTX ranges ----------------------------------------------------------------------------

def lost_ms(r) -> float:
    """Time a range's GPU sat idle over the run: calls x (wall - busy), where the wall is the
    one its utilization is taken against (busy / utilization)."""
    wall = r.gpu_busy_ms_per_call / r.gpu_utilization if r.gpu_utilization > 0 else max(r.gpu_span_ms_per_call,
                                                                                        r.cpu_ms_per_call)
    return r.calls * max(wall - r.gpu_busy_ms_per_call, 0.0)


def _ranges_section(analysis: Analysis) -> str:
    ranges = sorted(analysis.main.ranges, key=lost_ms, reverse=True)
    if not ranges:
        return _section("ranges", "NVTX ranges", "Which part of the step loses the time?",
                        '<p class="note">No NVTX range launched GPU work in this process.</p>')
    shown = ranges[:MAX_RANGE_BARS]
    top = max(r.calls * r.gpu_busy_ms_per_call + lost_ms(r) for r in shown) or 1.0
    w, left, bar_h = 900, 260, 16
    h = len(shown) * (bar_h + 6) + 26
    pw = w - left - 90
    parts = []
    for k, r in enumerate(shown):
        y = 4 + k * (bar_h + 6)
        busy, lost = r.calls * r.gpu_busy_ms_per_call, lost_ms(r)
        tip = (f"{r.name}: {r.calls} calls; per call GPU busy {r.gpu_busy_ms_per_call:.3f} ms, span "
               f"{r.gpu_span_ms_per_call:.3f} ms, CPU {r.cpu_ms_per_call:.3f} ms, utilization {r.gpu_utilization:.0%}; "
               f"GPU idle {lost:.3f} ms over the run")
        parts.append(text(left - 6, y + 12, r.name if len(r.name) < 38 else r.name[:36] + "...", "lab", "end"))
        parts.append(rect(left, y, pw * busy / top, bar_h, "busy", tip))
        parts.append(rect(left + pw * busy / top, y, pw * lost / top, bar_h, "lost", tip))
        parts.append(text(left + pw * (busy + lost) / top + 4, y + 12, f"{lost:.2f} ms idle", "tick"))
    parts.append(text(left, h - 6, f"ms over the run (0 to {top:.2f}): blue GPU busy, red GPU idle while the range ran",
                      "tick"))
    svg = f'<svg class="chart" viewBox="0 0 {w} {h}" width="100%">{"".join(parts)}</svg>'
    head = "".join(f"<th>{c}</th>" for c in ("range", "calls", "kernels", "GPU busy ms", "GPU span ms", "CPU ms",
                                             "util", "syncs", "GPU idle ms (run)", "verdict"))
    body_rows = "".join(
        f"<tr><td>{esc(r.name)}</td><td>{r.calls}</td><td>{r.kernels_per_call:.0f}</td>"
        f"<td>{r.gpu_busy_ms_per_call:.3f}</td><td>{r.gpu_span_ms_per_call:.3f}</td><td>{r.cpu_ms_per_call:.3f}</td>"
        f"<td>{r.gpu_utilization:.0%}</td><td>{r.syncs_per_call:.0f}</td><td>{lost_ms(r):.3f}</td>"
        f'<td class="v-{esc(r.verdict)}">{esc(r.verdict)}</td></tr>' for r in ranges)
    table = f'<table class="data"><tr>{head}</tr>{body_rows}</table>'
    return _section("ranges", "NVTX ranges, by GPU time lost",
                    "Which part of the step loses the time? Per range (median per call): GPU busy, GPU span, CPU "
                    "time, utilization; sorted by the GPU idle time it accounts for over the run.",
                    svg + '<p class="note">Per call, medians; ranges nest (an iteration holds its forward).</p>'
                    + table)


# ---- predictions and tune -------------------------------------------------------------------

def _scope_rows(predictions: dict, tune: Optional[dict]) -> list:
    measured = {}
    if tune:
        for row in tune.get("rows", []):
            if row.get("speedup"):
                measured[row["scope"]] = (row["speedup"], row.get("status"), row.get("correct"))
    names = [s for s in SCOPES if s in predictions or s in measured]
    return [(s, predictions.get(s) if isinstance(predictions.get(s), dict) else {}, measured.get(s)) for s in names]


def _decision(predictions: dict) -> float:
    """The predicted speedup from which the report says graphs help: the model's, else today's."""
    return predictions.get("go_decision") or GO_DECISION


def _predictions_chart(predictions: dict, tune: Optional[dict]) -> str:
    rows = _scope_rows(predictions, tune)
    bound = predictions.get("bound") or (tune or {}).get("eager_ms", 0) / ((tune or {}).get("gpu_busy_ms") or 1e9)
    values = [bound or 1, 1.0]
    for _, p, m in rows:
        values += [v for v in (p.get("speedup"), p.get("low"), p.get("high")) if v]
        if m:
            values.append(m[0])
    decision = _decision(predictions)
    lo, hi = min(min(values) / 1.3, 0.8), max(values) * 1.3
    w, left, row_h = 900, 140, 30
    h = len(rows) * row_h + 44
    pw = w - left - 20
    def xv(v):
        return (left + pw * math.log10(v / lo) / math.log10(hi / lo))
    parts = [line(xv(1), 6, xv(1), h - 30, "one", "1x: eager"), text(xv(1), h - 16, "eager 1x", "tick", "middle"),
             line(xv(decision), 6, xv(decision), h - 30, "help",
                  f"{decision:.2f}x: graphs help above it (under it a gain is within the noise of the timings)")]
    for t in log_ticks(lo, hi):
        if abs(t - 1) > 1e-9:
            parts.append(text(xv(t), h - 16, f"{t:g}x", "tick", "middle"))
    if bound:
        parts.append(line(xv(bound), 6, xv(bound), h - 30, "limit", f"GPU-busy bound {bound:.2f}x: no graph beats it"))
        parts.append(text(xv(bound) - 3, h - 4, f"GPU-busy bound {bound:.2f}x", "lim", "end"))
    for k, (scope, p, m) in enumerate(rows):
        y = 10 + k * row_h
        parts.append(text(left - 8, y + 12, scope, "lab", "end"))
        if p.get("speedup"):
            if p.get("low") is not None:
                basis = f"; {p['interval_basis']}" if p.get("interval_basis") else ""
                parts.append(line(xv(p["low"]), y + 8, xv(p["high"]), y + 8, "whisk",
                                  f"{scope}: predicted interval {p['low']:.2f}-{p['high']:.2f}x (80 % interval{basis})"))
            parts.append(f'<circle cx="{num(xv(p["speedup"]))}" cy="{y + 8}" r="6" class="pred"><title>'
                         f'{esc(scope)}: predicted {p["speedup"]:.2f}x ({p["ms"]:.3f} ms/iteration)'
                         f'{"".join(esc("; " + p[k]) for k in ("as_applied", "caveat") if p.get(k))}</title></circle>')
        elif p.get("refused"):
            parts.append(text(left + 4, y + 12, f"patch refuses it: {p['refused']}"[:110], "tick"))
        if m:
            x = xv(m[0])
            parts.append(f'<path d="M{num(x)} {y + 1}l7 7l-7 7l-7 -7z" class="meas"><title>{esc(scope)}: measured '
                         f'{m[0]:.2f}x by tune ({esc(m[1])}, '
                         f'{"matches eager" if m[2] else "not matched"})</title></path>')
    return f'<svg class="chart" viewBox="0 0 {w} {h}" width="100%">{"".join(parts)}</svg>'


def _predictions_section(predictions: dict, tune: Optional[dict]) -> str:
    if not predictions or "note" in predictions:
        note = (predictions or {}).get("note", "no predictions")
        return _section("predictions", "Predicted speedup per capture scope", "What would each scope give?",
                        f'<p class="note">{esc(note)}</p>')
    legend = ('<div class="legend"><span class="sw pred"></span>predicted (80 % interval) '
              + ('<span class="sw meas"></span>measured by tune ' if tune else "")
              + '<span class="sw limit"></span>GPU-busy bound <span class="sw help"></span>'
              + f'{_decision(predictions):.2f}x</div>')
    source = eager_source_text(predictions)
    against = ""
    if tune and tune.get("eager_ms"):
        against = (f" Tune's speedups are against its own eager run ({tune['eager_ms']:.3f} ms, another process): "
                   f"a measured speedup past the bound means that eager run was slower than the profile's.")
    return _section("predictions", "Predicted speedup per capture scope",
                    "What would each scope give, against the physical bound (untraced eager / GPU busy)?",
                    legend + _predictions_chart(predictions, tune)
                    + f'<p class="note">Eager iteration {predictions["eager_ms"]:.3f} ms ({esc(source)}); bound for '
                    f'any graph {predictions["bound"]:.2f}x.{esc(against)}</p>'
                    + "".join(f'<p class="note">{esc(scope)}: {esc(p["caveat"])}</p>' for scope, p in predictions.items()
                              if isinstance(p, dict) and p.get("caveat"))
                    + f'<p class="advice">advice: {esc(predictions.get("advice", ""))}</p>')


def _tune_section(tune: dict, diff: Optional[str], alone: bool) -> str:
    from tuner.tune import result_table_rows

    predicted = {row["scope"]: row.get("predicted") for row in tune.get("rows", [])}
    head = "".join(f"<th>{c}</th>" for c in ("scope", "ms/iter", "measured", "predicted (tune --trace)",
                                             "overhead recovered", "extra MB", "correctness", "status"))
    body = ""
    for scope, ms, speedup, recovered, extra, correct, status in result_table_rows(tune):
        cls = ' class="win"' if scope == tune.get("winner") else ""
        pred = predicted.get(scope)
        body += (f"<tr{cls}><td>{esc(scope)}</td><td>{esc(ms)}</td><td>{esc(speedup)}</td>"
                 f"<td>{f'{pred:.2f}x' if pred else '-'}</td><td>{esc(recovered)}</td><td>{esc(extra)}</td>"
                 f'<td class="{"bad" if correct == "MISMATCH" else ""}">{esc(correct)}</td><td>{esc(status)}</td></tr>')
    winner = tune.get("winner", "eager")
    unit = "model call" if (tune.get("step") or {}).get("kind") == "inference" else "training step"
    busy = (f"; GPU-busy bound {tune['gpu_busy_ms']:.3f} ms/{unit} ({tune['eager_ms'] / tune['gpu_busy_ms']:.2f}x at "
            f"most)" if tune.get("gpu_busy_ms") else "")
    parts = [f'<p class="advice">winner: {esc(winner)}'
             + ("" if winner == "eager" else f" (apply with <code>cg-advise patch {esc(tune.get('script', ''))}</code>)")
             + "</p>",
             f'<p class="note">{esc(tune.get("script", ""))} {esc(" ".join(tune.get("args", [])))}: ms per {unit}, '
             f"untraced (timed steps {tune.get('timing', {}).get('warmup', '?')}.."
             f"{(tune.get('timing', {}).get('warmup') or 0) + (tune.get('timing', {}).get('iterations') or 0)}){esc(busy)}."
             f"{(' ' + esc(tune['note'])) if tune.get('note') else ''}</p>",
             f'<table class="data">{"<tr>" + head + "</tr>"}{body}</table>']
    if alone:
        parts.insert(0, _predictions_chart({}, tune))
    if diff:
        parts.append("<h3>The patch</h3>" + _diff_html(diff))
    elif winner != "eager":
        parts.append('<p class="note">No patch shown: the script was not found beside the result, or it changed '
                     "since it was tuned.</p>")
    return _section("tune", "Measured by tune: each scope against eager",
                    "What did each capture scope measure on the GPU, was it correct, and what does the winning "
                    "change look like?", "".join(parts))


def _diff_html(diff: str) -> str:
    def cls(row: str) -> str:
        if row.startswith(("+++", "---")):
            return "dh"
        return {"+": "da", "-": "dd", "@": "dc"}.get(row[:1], "")
    return '<pre class="diff">' + "".join(f'<span class="{cls(r)}">{esc(r)}</span>\n'
                                          for r in diff.splitlines()) + "</pre>"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:#1d2330;background:#f6f7f9;margin:0}
main{max-width:1200px;margin:0 auto;padding:16px 24px 40px}
h1{font-size:20px;margin:8px 0 4px}h2{font-size:17px;margin:0 0 2px}h3{font-size:15px;margin:14px 0 6px}
section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:14px 16px;margin:14px 0}
.q{color:#556;margin:0 0 8px;font-style:italic}.note{color:#445;margin:6px 0}.meta{color:#556;margin:0 0 8px}
.tiles{display:flex;flex-wrap:wrap;gap:8px}.tile{border:1px solid #dde1e7;border-radius:6px;padding:6px 10px;min-width:120px}
.tile .k{font-size:11px;color:#667;text-transform:uppercase;letter-spacing:.03em}.tile .v{font-size:18px;font-weight:600}
.v-launch-bound{color:#c62828}.v-sync-bound{color:#b26a00}.v-gpu-bound,.v-graphed{color:#2e7d32}
.tile.v-launch-bound{background:#fdecea}.tile.v-gpu-bound,.tile.v-graphed{background:#e8f5e9}.tile.v-sync-bound{background:#fff4e0}
.advice{font-weight:600;margin:8px 0}.reasons{margin:6px 0;padding-left:20px;color:#334}
.legend{font-size:12px;color:#445;margin:4px 0}.sw{display:inline-block;width:11px;height:11px;margin:0 3px 0 8px;vertical-align:-1px;border-radius:2px}
svg.labels{margin-top:20px;flex:none}.cut{fill:#90a4ae}.cutl{font-size:10px;fill:#37474f}
.tl{display:flex;border:1px solid #dde1e7;border-radius:4px;overflow:hidden}.plotwrap{flex:1;min-width:0}
svg.plot{display:block;cursor:grab;background:#fbfcfd}svg.axis{display:block;background:#f0f2f5}
svg.plot rect{vector-effect:non-scaling-stroke;stroke-width:.7px}
.tlbar{margin:6px 0}.tlbar button{font-size:12px;margin-right:4px}.hint{font-size:12px;color:#667}
.readout{font:12px ui-monospace,monospace;color:#223;min-height:18px;padding:4px;background:#f0f2f5;margin-top:4px;white-space:pre-wrap}
.lab{font-size:11px;fill:#334}.b{font-weight:600}.gapl{fill:#c62828}
.ek,.sw.ek{fill:#1e6fd9;stroke:#1e6fd9;background:#1e6fd9}.em,.sw.em{fill:#e0a100;stroke:#e0a100;background:#e0a100}
.es,.sw.es{fill:#8d6e63;stroke:#8d6e63;background:#8d6e63}.eg,.sw.eg{fill:#7b1fa2;stroke:#7b1fa2;background:#7b1fa2}
.cl,.sw.cl{fill:#5c9ded;stroke:#5c9ded;background:#5c9ded}.cg,.sw.cg{fill:#ab47bc;stroke:#ab47bc;background:#ab47bc}
.cs,.sw.cs{fill:#e53935;stroke:#b71c1c;background:#e53935}.cc,.sw.cc{fill:#b0bec5;stroke:#b0bec5;background:#b0bec5}
.en,.sw.en{fill:#43a047;stroke:#2e7d32;background:#43a047;fill-opacity:.75}
.gap,.sw.gap{fill:#ef5350;stroke:#ef5350;background:#ef5350}.shade{fill:#ef5350;fill-opacity:.13;stroke:none}
.it0{fill:#cfd8dc;stroke:#90a4ae}.it1{fill:#eceff1;stroke:#90a4ae}.itline{stroke:#546e7a;stroke-dasharray:4 3;vector-effect:non-scaling-stroke}
svg.chart{display:block;background:#fff}.grid{stroke:#eceff1}.tick{font-size:11px;fill:#556}.axisl{stroke:#90a4ae}
.period,.sw.period{fill:#cfd8dc;background:#cfd8dc}.busy,.sw.busy{fill:#1e6fd9;background:#1e6fd9}.lost{fill:#ef5350}
.limit,.sw.limit{stroke:#2e7d32;stroke-width:2;stroke-dasharray:6 3;background:#2e7d32}.lim{font-size:11px;fill:#2e7d32;font-weight:600}
.eager,.sw.eager{stroke:#b26a00;stroke-width:1.5;stroke-dasharray:3 3;background:#b26a00}.eag{font-size:11px;fill:#b26a00}
.hbar{fill:#5c7cfa}.mark{stroke:#c62828;stroke-dasharray:3 2}.markt{font-size:10px;fill:#c62828}
.one{stroke:#556;stroke-width:1.5}.help,.sw.help{stroke:#b26a00;stroke-dasharray:4 3;background:#b26a00}.whisk{stroke:#1e6fd9;stroke-width:3;stroke-linecap:round;opacity:.45}
.pred,.sw.pred{fill:#1e6fd9;background:#1e6fd9}.meas,.sw.meas{fill:#e65100;background:#e65100}
.two{display:grid;grid-template-columns:1fr 1fr;gap:16px}figure{margin:0}figcaption{font-size:12px;color:#445}
table.data{border-collapse:collapse;font-size:12.5px;margin-top:8px;width:100%}
table.data th,table.data td{border-bottom:1px solid #e6e9ee;padding:3px 6px;text-align:right}
table.data th:first-child,table.data td:first-child{text-align:left}table.data tr.win{background:#e8f5e9;font-weight:600}
td.bad{color:#c62828;font-weight:600}
pre.diff{font:12px/1.4 ui-monospace,monospace;background:#fafbfc;border:1px solid #dde1e7;padding:8px;overflow:auto;max-height:480px}
.da{background:#e6ffec;color:#116329;display:inline-block;width:100%}.dd{background:#ffebe9;color:#82071e;display:inline-block;width:100%}
.dc{color:#0550ae}.dh{color:#57606a;font-weight:600}
footer{color:#667;font-size:12px;margin-top:12px}
"""

JS = r"""
(function(){
function fmt(us){if(us<1)return (us*1e3).toFixed(0)+' ns';if(us<1e3)return +us.toPrecision(3)+' us';
 if(us<1e6)return +(us/1e3).toPrecision(4)+' ms';return +(us/1e6).toPrecision(4)+' s';}
document.querySelectorAll('#timeline').forEach(function(sec){
 var svg=sec.querySelector('svg.plot'),axis=sec.querySelector('svg.axis'),out=sec.querySelector('.readout');
 var d=svg.dataset,H=+d.h,full=[+d.x0,+d.w],init=[+d.ix,+d.iw],v=init.slice(),NS='http://www.w3.org/2000/svg';
 function draw(){
  v[1]=Math.min(Math.max(v[1],1e-3),full[1]);v[0]=Math.min(Math.max(v[0],full[0]),full[0]+full[1]-v[1]);
  svg.setAttribute('viewBox',v[0]+' 0 '+v[1]+' '+H);
  var W=axis.getBoundingClientRect().width||800;while(axis.firstChild)axis.removeChild(axis.firstChild);
  var raw=v[1]/8,p=Math.pow(10,Math.floor(Math.log10(raw))),step=[1,2,5,10].map(function(m){return m*p}).find(function(s){return s>=raw});
  for(var t=Math.ceil(v[0]/step)*step;t<=v[0]+v[1];t+=step){var x=(t-v[0])/v[1]*W;
   var l=document.createElementNS(NS,'line');l.setAttribute('x1',x);l.setAttribute('x2',x);l.setAttribute('y1',14);l.setAttribute('y2',20);l.setAttribute('stroke','#556');axis.appendChild(l);
   var s=document.createElementNS(NS,'text');s.setAttribute('x',x+2);s.setAttribute('y',11);s.setAttribute('class','tick');s.textContent='+'+fmt(t);axis.appendChild(s);}
 }
 svg.addEventListener('wheel',function(e){e.preventDefault();var r=svg.getBoundingClientRect(),f=(e.clientX-r.left)/r.width,x=v[0]+f*v[1];
  v[1]*=e.deltaY<0?0.8:1.25;v[0]=x-f*v[1];draw();},{passive:false});
 var drag=null;svg.addEventListener('mousedown',function(e){drag=[e.clientX,v[0]];svg.style.cursor='grabbing';});
 window.addEventListener('mouseup',function(){drag=null;svg.style.cursor='';});
 window.addEventListener('mousemove',function(e){if(!drag)return;var r=svg.getBoundingClientRect();v[0]=drag[1]-(e.clientX-drag[0])/r.width*v[1];draw();});
 svg.addEventListener('dblclick',function(){v=init.slice();draw();});
 svg.addEventListener('mouseover',function(e){var t=e.target.querySelector&&e.target.querySelector('title');if(t)out.textContent=t.textContent;});
 sec.querySelectorAll('button').forEach(function(b){b.addEventListener('click',function(){var a=b.dataset.act,c=v[0]+v[1]/2;
  if(a==='in'){v[1]/=2;v[0]=c-v[1]/2;}else if(a==='out'){v[1]*=2;v[0]=c-v[1]/2;}else if(a==='reset'){v=init.slice();}else{v=full.slice();}draw();});});
 window.addEventListener('resize',draw);draw();
});
document.querySelectorAll('svg.chart').forEach(function(svg){var sec=svg.closest('section'),out=null;
 svg.addEventListener('mouseover',function(e){var t=e.target.querySelector&&e.target.querySelector('title');if(!t)return;
  if(!out){out=document.createElement('div');out.className='readout';svg.parentNode.insertBefore(out,svg.nextSibling);}out.textContent=t.textContent;});});
})();
"""
