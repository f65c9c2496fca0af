"""The same workloads profiled with Nsight Systems and with torch.profiler, side by side (#15).

Reads the folder `bench/gpu_backends.sh OUT` writes:

    OUT/nsys/NAME.sqlite + NAME.cg-advise-run.json   (cg-advise profile, nsys backend)
    OUT/kineto/NAME.json.gz + NAME.summary.json      (the bootstrap with CG_ADVISE_KINETO_TRACE)
    (or OUT/kineto/NAME.kineto.json.gz + NAME.cg-advise-run.json from `profile --backend torch`)

and analyses both with the same code: per-iteration kernels, GPU busy and period, iteration
count, each backend's tracing overhead (traced period / its own untraced baseline, timed in
the same process's warm-up), and the prediction per scope, twice: with each run's own
baseline (what a user gets; two processes' host-bound baselines differ by tens of per cent on
a shared machine, whatever the backend) and with the same baseline and calibration, the nsys
run's, so that only what the traces say differs. The torch run's record takes the nsys run's
calibration and applied scopes (same GPU, same script) with its own baseline, unless it has a
run record of its own. With the same baseline, what moves the predictions of the scopes that leave host
work eager (compile, fwd_bwd, submodule) is the traced split of the host time: the share of
the traced period outside the forward and backward, which each tracer inflates in its own
way; it is printed for both traces beside the untraced split the bootstrap timed in each
run's warm-up (runs from before the bootstrap timed it show none). Prints markdown tables
and the tolerance checks:

    python bench/backends_compare.py OUT [--markdown FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import runrecord  # noqa: E402
from advisor.analysis import analyse  # noqa: E402
from advisor.predict import load_model, predictions_for  # noqa: E402
from advisor.trace import open_trace  # noqa: E402

BUSY_TOLERANCE = 0.03        # the issue's: GPU busy per iteration within 3 %
PREDICTION_TOLERANCE = 0.10  # predicted speedups within 10 % of each other
SCOPES = ("submodule", "fwd_bwd", "full_iteration", "compile", "forward")


def kineto_files(folder: Path, name: str):
    """(trace, run record) of the torch run: profile's layout, else gpu_backends.sh's."""
    profiled = folder / "kineto" / f"{name}.kineto.json.gz"
    if profiled.exists():
        return profiled, runrecord.read(folder / "kineto" / f"{name}.cg-advise-run.json")
    trace = folder / "kineto" / f"{name}.json.gz"
    summary = json.loads((folder / "kineto" / f"{name}.summary.json").read_text())
    nsys_record = runrecord.read(folder / "nsys" / f"{name}.cg-advise-run.json") or {}
    record = {**nsys_record, "untraced": summary.get("untraced") or {},
              "bootstrap": {k: v for k, v in summary.items() if k != "untraced"}, "backend": "torch.profiler"}
    return trace, record


def speedups(predictions: dict) -> dict:
    return {scope: p["speedup"] for scope, p in predictions.items()
            if scope in SCOPES and isinstance(p, dict) and "speedup" in p}


def measure(trace_path: Path, record: dict, model: dict, same_baseline: dict) -> dict:
    """The figures of one trace; ``same_baseline`` is the other backend's run record."""
    analysis = analyse(open_trace(trace_path))
    analysis.predictions = predictions_for(analysis, model, record)
    s = analysis.main.summary
    baseline = runrecord.measured_eager_ms(record)
    predictions = analysis.predictions
    # the same measured inputs: the baseline, and the calibration (a micro-benchmark run after
    # the profile, not part of the trace, whose host costs swing from process to process)
    shared = {**record, "untraced": same_baseline.get("untraced") or {},
              "calibration": _usable(same_baseline.get("calibration")) or record.get("calibration") or {}}
    phases = s.phases
    return {
        "iterations": s.iterations, "kernels": s.kernels_per_iteration, "ops": s.gpu_ops_per_iteration,
        "busy_ms": s.gpu_busy_ms_per_iteration, "period_ms": s.gpu_period_ms, "verdict": s.verdict,
        "graph_mode": analysis.trace["graph_trace_mode"], "baseline_ms": baseline,
        "overhead": s.gpu_period_ms / baseline if baseline else None,
        "tracing_us_per_op": (s.gpu_period_ms - baseline) / s.gpu_ops_per_iteration * 1e3
        if baseline and s.gpu_ops_per_iteration else None,
        "launch_api_ms": s.launch_api_ms_per_iteration, "between_ms": phases.between_iterations_ms,
        "forward_ms": phases.forward_ms, "backward_ms": phases.backward_ms, "optimizer_ms": phases.optimizer_ms,
        "outside_share": outside_share(s.gpu_period_ms, phases.forward_ms, phases.backward_ms)
        if phases.marked else None,
        "untraced_outside_share": untraced_outside_share(record.get("untraced") or {}),
        "eager_ms": predictions.get("eager_ms"), "eager_source": predictions.get("eager_source"),
        "speedups": speedups(predictions),
        "speedups_same_baseline": speedups(predictions_for(analysis, model, shared)),
        "note": predictions.get("note", ""),
    }


def _usable(calibration):
    """A calibration that ran (one that failed holds only its error)."""
    return calibration if isinstance(calibration, dict) and calibration.get("eager_launch_us") else None


def outside_share(period_ms, forward_ms, backward_ms):
    """Share of the iteration's host time outside the forward and backward: what compile and
    fwd_bwd leave eager (advisor/predict.py's physical model scales the traced one)."""
    return (period_ms - forward_ms - backward_ms) / period_ms if period_ms else None


def untraced_outside_share(untraced: dict):
    """The same from the bootstrap's untraced warm-up, when it timed the phases."""
    host, forward = untraced.get("host_ms_per_iteration"), untraced.get("forward_ms_per_iteration")
    if not host or forward is None:
        return None
    return outside_share(host, forward, untraced.get("backward_ms_per_iteration", 0.0))


def ratio(a, b):
    return b / a if a else None


def compare(folder: Path, model: dict) -> list:
    rows = []
    for sqlite in sorted((folder / "nsys").glob("*.sqlite")):
        name = sqlite.stem
        trace, record = kineto_files(folder, name)
        if not trace.exists():
            print(f"{name}: no torch trace, skipped", file=sys.stderr)
            continue
        nsys_record = runrecord.read(folder / "nsys" / f"{name}.cg-advise-run.json") or {}
        nsys = measure(sqlite, nsys_record, model, nsys_record)
        torch = measure(trace, record, model, nsys_record)
        row = {"workload": name, "nsys": nsys, "torch": torch, "checks": checks(nsys, torch)}
        again = folder / "nsys_repeat" / f"{name}.sqlite"
        if again.exists():   # the same backend in another process: the noise floor of every check
            again_record = runrecord.read(folder / "nsys_repeat" / f"{name}.cg-advise-run.json") or {}
            row["nsys_repeat"] = measure(again, again_record, model, nsys_record)
        rows.append(row)
    return rows


def checks(nsys: dict, torch: dict) -> dict:
    """The issue's tolerances; kernel counts are compared only where both traces list graph
    kernels the same way (nsys's default graph mode shows a replay as one operation)."""
    out = {"busy": abs(torch["busy_ms"] / nsys["busy_ms"] - 1) <= BUSY_TOLERANCE,
           "iterations": nsys["iterations"] == torch["iterations"]}
    if nsys["graph_mode"] == torch["graph_mode"]:
        out["kernels"] = nsys["kernels"] == torch["kernels"]
    worst = largest_difference(nsys["speedups"], torch["speedups_same_baseline"])
    # an estimated eager time (a profile without a measured baseline; before 2026-11-28 also one
    # whose baseline read slower than the traced period) comes from each tracer's own cost: the
    # two predictions are then no comparison
    if worst and nsys["eager_source"] == "measured":
        out["predictions (same baseline)"] = worst[0] <= PREDICTION_TOLERANCE
    return out


def largest_difference(a: dict, b: dict):
    """(relative difference, scope) of the scope where two sets of predictions differ most."""
    diffs = [(abs(b[s] / a[s] - 1), s) for s in set(a) & set(b)]
    return max(diffs) if diffs else None


def fmt(value, digits=3):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(rows: list) -> str:
    lines = ["| workload | backend | iterations | kernels/it | ops/it | GPU busy ms | period ms | untraced ms | "
             "overhead (period/untraced) | verdict | predicted speedups | checks |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        for backend in ("nsys", "torch"):
            m = row[backend]
            speedups = ", ".join(f"{s} {v:.2f}x" for s, v in m["speedups"].items()) or (m["note"][:60] or "-")
            checked = ("" if backend == "nsys" else
                       ", ".join(f"{k} {'ok' if v else 'FAIL'}" for k, v in row["checks"].items()))
            lines.append(f"| {row['workload'] if backend == 'nsys' else ''} | {backend} ({m['graph_mode']}) | "
                         f"{m['iterations']} | {m['kernels']:.0f} | {m['ops']:.0f} | {fmt(m['busy_ms'])} | "
                         f"{fmt(m['period_ms'])} | {fmt(m['baseline_ms'])} | {fmt(m['overhead'], 2)}x | "
                         f"{m['verdict']} | {speedups} | {checked} |")
    lines += ["", "| workload | busy torch/nsys | period torch/nsys | untraced torch/nsys | overhead nsys | "
              "overhead torch | tracing cost per op nsys / torch (us) | largest prediction difference, same "
              "baseline | same, own baselines |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        n, t = row["nsys"], row["torch"]
        same = largest_difference(n["speedups"], t["speedups_same_baseline"])
        own = largest_difference(n["speedups"], t["speedups"])
        lines.append(f"| {row['workload']} | {fmt(ratio(n['busy_ms'], t['busy_ms']), 4)} | "
                     f"{fmt(ratio(n['period_ms'], t['period_ms']), 3)} | "
                     f"{fmt(ratio(n['baseline_ms'], t['baseline_ms']), 3)} | {fmt(n['overhead'], 2)}x | "
                     f"{fmt(t['overhead'], 2)}x | {fmt(n['tracing_us_per_op'], 1)} / {fmt(t['tracing_us_per_op'], 1)} | "
                     f"{f'{same[0]:.1%} ({same[1]})' if same else '-'} | {f'{own[0]:.1%} ({own[1]})' if own else '-'} |")
    lines += ["", "Host time outside the forward and backward, share of the iteration (what compile and fwd_bwd "
              "leave eager): traced, as the predictions read it, and untraced, as the bootstrap timed it in each "
              "run's warm-up.", "",
              "| workload | traced nsys | traced torch | torch - nsys | untraced (nsys run) | untraced (torch run) |",
              "| --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        n, t = row["nsys"], row["torch"]
        if n.get("outside_share") is None and t.get("outside_share") is None:
            continue
        gap = (t["outside_share"] - n["outside_share"]) if None not in (n["outside_share"], t["outside_share"]) else None
        lines.append(f"| {row['workload']} | {fmt(n['outside_share'])} | {fmt(t['outside_share'])} | "
                     f"{f'{gap:+.3f}' if gap is not None else '-'} | {fmt(n.get('untraced_outside_share'))} | "
                     f"{fmt(t.get('untraced_outside_share'))} |")
    repeated = [row for row in rows if "nsys_repeat" in row]
    if repeated:
        lines += ["", "nsys against nsys: the same script profiled again in another process, read by the same "
                  "code; the floor under the tolerances between the backends.", "",
                  "| workload | busy again/first | untraced again/first | largest prediction difference, same "
                  "baseline (nsys vs nsys) | same, torch vs nsys |", "| --- | --- | --- | --- | --- |"]
        for row in repeated:
            n, r, t = row["nsys"], row["nsys_repeat"], row["torch"]
            again = largest_difference(n["speedups"], r["speedups_same_baseline"])
            torch = largest_difference(n["speedups"], t["speedups_same_baseline"])
            lines.append(f"| {row['workload']} | {fmt(ratio(n['busy_ms'], r['busy_ms']), 4)} | "
                         f"{fmt(ratio(n['baseline_ms'], r['baseline_ms']), 3)} | "
                         f"{f'{again[0]:.1%} ({again[1]})' if again else '-'} | "
                         f"{f'{torch[0]:.1%} ({torch[1]})' if torch else '-'} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--markdown", type=Path, help="Also write the table to this file.")
    parser.add_argument("--json", type=Path, help="Also write every figure as JSON to this file.")
    args = parser.parse_args()
    rows = compare(args.folder, load_model())
    text = markdown(rows)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    failed = [(r["workload"], k) for r in rows for k, ok in r["checks"].items() if not ok]
    print("checks: " + ("all within tolerance" if not failed else
                        "outside tolerance: " + ", ".join(f"{w} {k}" for w, k in failed)))


if __name__ == "__main__":
    main()
