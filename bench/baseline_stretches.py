"""The profile's two untraced stretches against each other and against tune's eager time: the
second half of the warm-up (before the recording) and the iterations after the recording
(most of the baseline's 3 s), from every committed run record of the unseen sets. The stretch
after the recording reads slower (nsys is still attached), so an untraced time above the traced
period is no sign of a slow start, and the prediction no longer swaps it for the traced
estimate (``advisor.predict.eager_ms``).

On the H200 set whose profiles timed 3 s on both sides (CG_ADVISE_BASELINE_BEFORE=3,
CG_ADVISE_BASELINE_SECONDS=6) the stretch before the recording reads closer to tune's time but
still slower (nsys is attached from the start), and with more spread than the stretch after it:
the default stays, the model's baseline factor taking the slowdown out.

    python bench/baseline_stretches.py [--json]
"""

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor import predict as pr  # noqa: E402
from paired_vs_predicted import close, compare, tune_result, tuned_row  # noqa: E402
from tuner.search import eager_slowdown  # noqa: E402
from unseen_eval import GRAPH_PAIR, H200_STRETCHES, NOW, RESULTS, SETS  # noqa: E402

TOLERANCE = 0.2


def stretches(record: Path) -> list:
    """The record's untraced ms/iteration per stretch (``gpu_ms_by_chunk``); [] where it has no two."""
    chunks = json.loads(record.read_text()).get("untraced", {}).get("gpu_ms_by_chunk") or []
    return chunks if len(chunks) == 2 and min(chunks) > 0 else []


def records() -> dict:
    """{run record: its two stretches} over the folders of the unseen sets."""
    folders = {(RESULTS / rows).parent for _, rows, _, _, _ in SETS}
    found = {}
    for folder in sorted(folders):
        for path in sorted(folder.rglob("*_eager.cg-advise-run.json")):
            chunks = stretches(path)
            if chunks:
                found[path] = chunks
    return found


def record_of(folder: Path, row: dict) -> Path | None:
    """The run record a dataset row was built from: of the row's workload, under the set's
    folder, the one whose untraced time is the row's baseline (a folder may hold the profiles of
    several machine starts)."""
    baseline = pr._value(row, "baseline_ms")
    for path in sorted(folder.rglob(f"{row['workload']}_eager.cg-advise-run.json")):
        untraced = json.loads(path.read_text()).get("untraced", {}).get("gpu_ms_per_iteration")
        if untraced and math.isclose(untraced, baseline, rel_tol=1e-9):
            return path
    return None


def against_tune(model: dict) -> list:
    """(set folder, workload, scope, tune's eager ms, the prediction's eager ms, before, after,
    traced period, timed as tune times now on the H100, the H200 set timed 3 s on both sides):
    each graph scope's tune process once."""
    out, seen = [], set()
    for _, rows, results, scope, _ in SETS:
        if scope not in GRAPH_PAIR:
            continue
        folder = (RESULTS / rows).parent
        for row in pr.read_dataset(RESULTS / rows):
            key = (rows, row["workload"], scope)
            tuned = tune_result(RESULTS / results, row["workload"])
            record = record_of(folder, row) if key not in seen and tuned else None
            measured = tuned_row(json.loads(tuned.read_text()), scope) if record and stretches(record) else None
            if measured is None or not measured.get("paired_eager_ms"):
                continue
            seen.add(key)
            before, after = stretches(record)
            out.append((str(folder.relative_to(RESULTS)), row["workload"], scope,
                        measured["paired_eager_ms"] / eager_slowdown(scope), pr.eager_ms(row, model)[0],
                        before, after, pr._value(row, "period_ms"), rows.startswith(NOW),
                        rows.startswith(H200_STRETCHES)))
    return out


def one_stretch_hits(model: dict) -> dict:
    """On the H200 set timed 3 s on both sides: {figure: {scope: [hits, measurements]}} with each
    row's untraced time replaced by one stretch of its record (or kept: the median of both), the
    rest of the row and the model as they are."""
    labels = (("the median of both (as measured)", None), ("the 3 s before the recording", 0),
              ("the 3 s after the recording", 1))
    out = {label: {scope: [0, 0] for scope in GRAPH_PAIR} for label, _ in labels}
    for _, rows, results, scope, tolerance in SETS:
        if scope not in GRAPH_PAIR or not rows.startswith(H200_STRETCHES):
            continue
        folder = (RESULTS / rows).parent
        dataset = pr.read_dataset(RESULTS / rows)
        both = [stretches(record) if (record := record_of(folder, row)) else [] for row in dataset]
        for label, chunk in labels:
            chosen = [row if chunk is None or not pair else {**row, "baseline_ms": pair[chunk]}
                      for row, pair in zip(dataset, both)]
            found = compare(chosen, RESULTS / results, scope, model, tolerance)["paired"]
            out[label][scope] = [a + b for a, b in zip(out[label][scope], found)]
    return out


def summary(label: str, pairs: list) -> dict:
    """(figure, tune's eager time) pairs: the log error's median and spread, and how many of
    the figures are within 20 % of tune's time as a prediction is counted (``close``)."""
    errors = [math.log(measured / figure) for figure, measured in pairs]
    return {"figure": label, "n": len(pairs), "median_log": statistics.median(errors),
            "sd_log": statistics.pstdev(errors), "within_20": sum(close(f, m, TOLERANCE) for f, m in pairs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = records()
    both_long = str(RESULTS / H200_STRETCHES)
    ratios = [after / before for path, (before, after) in found.items() if not str(path).startswith(both_long)]
    long_ratios = [after / before for path, (before, after) in found.items() if str(path).startswith(both_long)]
    model = pr.load_model()
    compared = against_tune(model)
    hits = one_stretch_hits(model)
    figures = {}
    for group, rows in (("every set", compared), ("timed as tune times now, H100", [r for r in compared if r[8]]),
                        ("the H200 set timed 3 s on both sides", [r for r in compared if r[9]])):
        figures[group] = [summary(label, [(figure(r), r[3]) for r in rows]) for label, figure in (
            ("the prediction's eager time", lambda r: r[4]),
            ("the stretch before the recording", lambda r: r[5]),
            ("the stretch after the recording", lambda r: r[6]))]
    if args.json:
        print(json.dumps({"after_over_before": ratios, "after_over_before_both_3s": long_ratios,
                          "against_tune": figures, "one_stretch_hits": hits}, indent=1))
        return
    print(f"after the recording over before it: median {statistics.median(ratios):.3f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}), slower in {sum(r > 1 for r in ratios)} of {len(ratios)} profiles")
    print(f"the same, both stretches 3 s (H200): median {statistics.median(long_ratios):.3f} "
          f"({min(long_ratios):.2f}-{max(long_ratios):.2f}), slower in {sum(r > 1 for r in long_ratios)} of "
          f"{len(long_ratios)} profiles")
    for group, rows in figures.items():
        print(f"tune's eager time against, {group}:")
        for s in rows:
            print(f"  {s['figure']:34s} median log {s['median_log']:+.3f}, sd {s['sd_log']:.3f}, "
                  f"within 20 % for {s['within_20']} of {s['n']}")
    print("the H200 set's speedups predicted from one stretch as the untraced time:")
    for label, scopes in hits.items():
        print(f"  {label:34s} " + ", ".join(f"{scope} {h} of {n}" for scope, (h, n) in scopes.items()))


if __name__ == "__main__":
    main()
