"""The profile's two untraced stretches against each other and against tune's eager time: the
second half of the warm-up (before the recording) and the iterations after the recording
(most of the baseline's 3 s), from every committed run record of the unseen sets. The stretch
after the recording reads slower (nsys is still attached), so an untraced time above the traced
period is no sign of a slow start, and the prediction no longer swaps it for the traced
estimate (``advisor.predict.eager_ms``).

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
from paired_vs_predicted import close, tune_result, tuned_row  # noqa: E402
from tuner.search import eager_slowdown  # noqa: E402
from unseen_eval import GRAPH_PAIR, NOW, RESULTS, SETS  # noqa: E402

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
    traced period, timed as tune times now): each graph scope's tune process once."""
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
                        before, after, pr._value(row, "period_ms"), rows.startswith(NOW)))
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
    ratios = [after / before for before, after in records().values()]
    compared = against_tune(pr.load_model())
    figures = {}
    for group, rows in (("every set", compared), ("timed as tune times now", [r for r in compared if r[8]])):
        figures[group] = [summary(label, [(figure(r), r[3]) for r in rows]) for label, figure in (
            ("the prediction's eager time", lambda r: r[4]),
            ("the stretch before the recording", lambda r: r[5]),
            ("the stretch after the recording", lambda r: r[6]))]
    if args.json:
        print(json.dumps({"after_over_before": ratios, "against_tune": figures}, indent=1))
        return
    print(f"after the recording over before it: median {statistics.median(ratios):.3f} "
          f"({min(ratios):.2f}-{max(ratios):.2f}), slower in {sum(r > 1 for r in ratios)} of {len(ratios)} profiles")
    for group, rows in figures.items():
        print(f"tune's eager time against, {group}:")
        for s in rows:
            print(f"  {s['figure']:34s} median log {s['median_log']:+.3f}, sd {s['sd_log']:.3f}, "
                  f"within 20 % for {s['within_20']} of {s['n']}")


if __name__ == "__main__":
    main()
