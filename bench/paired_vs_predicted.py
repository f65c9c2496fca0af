"""How often is a prediction within 20 % of what ONE tune process measures, timed paired against
timed in separate processes? For each script, the shipped model's prediction from its profile
(a dataset row written by bench/unseen_rows.py) beside each process of a `tune --runs N`
result: its paired speedup (graphing's slowdown of the eager windows taken out), and every
eager process against every process of the scope (what tune measured before pairing).

    CORPUS="..." bash bench/gpu_paired_tune.sh OUT 540 3 fwd_bwd        (GPU)
    python bench/unseen_rows.py PROFILES -o rows.csv                    (profiles of the same scripts)
    python bench/paired_vs_predicted.py rows.csv OUT [--scope fwd_bwd] [--without step_edges_us]

--without COLUMN predicts as if the profiles had not recorded COLUMN: the same measurements
with and without a figure the calibration added (the step's edges, 2026-11-29).
"""

import argparse
import itertools
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor import predict as pr  # noqa: E402
from build_dataset import fill_compile_eager, fill_helper_inputs, fill_syncs_after_backward  # noqa: E402
from tuner.search import eager_slowdown  # noqa: E402

TOLERANCE = 0.2   # the target for full_iteration and fwd_bwd; 0.25 for compile


def close(predicted: float, measured: float, tolerance: float = TOLERANCE) -> bool:
    return abs(predicted / measured - 1) <= tolerance


TUNE_RESULT_NAMES = ("{}.py.cg-advise.json", "{}.tune.json")   # tune's own result file, or its --json saved


def tune_result(results: Path, workload: str) -> Path | None:
    """A workload's tune result in ``results``: tune's own result file, or its --json saved by
    bench/gpu_paired_tune.sh; None where there is neither."""
    return next((p for p in (results / n.format(workload) for n in TUNE_RESULT_NAMES) if p.exists()), None)


def tuned_row(result: dict, scope: str) -> dict | None:
    """The scope's row of a tune result (its parsed JSON), where it ran ok and was timed paired."""
    return next((r for r in result["rows"]
                 if r.get("scope") == scope and r.get("status") == "ok" and r.get("paired_speedup")), None)


def paired_speedups(measured: dict, scope: str) -> list:
    """Each tune process's paired speedup of the scope's row (``tuned_row``), graphing's
    slowdown of the eager windows taken out."""
    return [s / eager_slowdown(scope) for s in (measured.get("paired_runs") or [measured["paired_speedup"]])]


def filled_from_script(row: dict) -> dict:
    """``row`` with what its profile's summary or run record predates read from its corpus
    script by today's discovery and patch: the syncs after the backward, what compile runs
    eagerly, the names the full-iteration helper is handed."""
    script = ROOT / "tests" / "corpus" / f"{row['workload']}.py"
    fill_syncs_after_backward(row, script)
    fill_compile_eager(row, script)
    fill_helper_inputs(row, script)
    return row


def compare(rows, results: Path, scope: str, model: dict, tolerance: float = TOLERANCE, keep=None) -> dict:
    """Each script's prediction beside each process's measurement: the per-script lines (and where
    a miss comes from), the hits of the paired and separate-process speedups, and how many paired
    measurements fall inside the interval the report prints beside the prediction. ``rows``: a
    dataset CSV, or its rows already read (a figure of them replaced, bench/baseline_stretches.py);
    ``keep(row, tune's row of the scope)``, where given, says which measurements count."""
    out = {"scripts": [], "sides": [], "paired": [0, 0], "separate": [0, 0], "inside": [0, 0]}
    for row in (pr.read_dataset(rows) if isinstance(rows, (str, Path)) else rows):
        path = tune_result(results, row["workload"])
        if path is None:
            continue
        filled_from_script(row)
        prediction = pr.predict(model, row).get(scope, {})
        predicted = prediction.get("speedup")
        result = json.loads(path.read_text())
        measured = tuned_row(result, scope)
        if predicted is None or measured is None or keep is not None and not keep(row, measured):
            continue
        paired = paired_speedups(measured, scope)
        separate = [e / g for e, g in itertools.product(result.get("eager_run_ms") or [], measured.get("run_ms") or [])]
        for kind, values in (("paired", paired), ("separate", separate)):
            out[kind][0] += sum(close(predicted, v, tolerance) for v in values)
            out[kind][1] += len(values)
        if prediction.get("low") and prediction.get("high"):
            out["inside"][0] += sum(prediction["low"] <= v <= prediction["high"] for v in paired)
            out["inside"][1] += len(paired)
        out["scripts"].append((row["workload"], predicted, paired, separate))
        if measured.get("paired_eager_ms") and measured.get("measured_ms"):
            out["sides"].append((row["workload"], pr.eager_ms(row, model)[0],
                                 measured["paired_eager_ms"] / eager_slowdown(scope),
                                 prediction["ms"], measured["measured_ms"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="dataset rows of the profiles (bench/unseen_rows.py)")
    parser.add_argument("results", type=Path, help="folder of tune's NAME.py.cg-advise.json (or NAME.tune.json) files")
    parser.add_argument("--scope", default="fwd_bwd")
    parser.add_argument("--model", type=Path, help="benefit model JSON (default: the shipped one)")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="a prediction this close counts")
    parser.add_argument("--without", action="append", default=[], metavar="COLUMN",
                        help="predict as if the profiles had not recorded COLUMN (e.g. step_edges_us; repeatable)")
    args = parser.parse_args()
    rows = [{**row, **{column: "" for column in args.without}} for row in pr.read_dataset(args.rows)]
    found = compare(rows, args.results, args.scope, pr.load_model(args.model), args.tolerance)
    print(f"{'script':22s} {'predicted':>9s}  {'paired, each process':28s} separate processes")
    for name, predicted, paired, separate in found["scripts"]:
        print(f"{name:22s} {predicted:8.2f}x  {' '.join(f'{v:.2f}x' for v in paired):28s} "
              f"{min(separate):.2f}x-{max(separate):.2f}x (median {statistics.median(separate):.2f}x)")
    if found["sides"]:
        print(f"\nwhere it misses (ms/iteration; measured: in the paired windows, the median over processes)\n"
              f"{'script':22s} {'eager: profile':>14s} {'measured':>9s} {'ratio':>6s}   "
              f"{args.scope + ': predicted':>24s} {'measured':>9s} {'ratio':>6s}")
        for name, eager, eager_measured, graphed, graphed_measured in found["sides"]:
            print(f"{name:22s} {eager:14.3f} {eager_measured:9.3f} {eager_measured / eager:6.2f}   "
                  f"{graphed:24.3f} {graphed_measured:9.3f} {graphed_measured / graphed:6.2f}")
    for kind in ("paired", "separate"):
        hits, total = found[kind]
        if total:
            print(f"{args.scope}, {kind}: the prediction within {args.tolerance:.0%} of one process for {hits} of {total} "
                  f"({hits / total:.0%})")
    inside, total = found["inside"]
    if total:
        print(f"{args.scope}, paired: inside the printed interval for {inside} of {total} ({inside / total:.0%})")


if __name__ == "__main__":
    main()
