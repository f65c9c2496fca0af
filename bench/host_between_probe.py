"""Would a correction of the traced host time between iterations predict full_iteration better?
(#12; tried, not adopted.) Host-bound tiny steps (``train_eval_toggle``, ``eval_in_epoch``) run
their graph 0.5-0.8x the predicted time on most sets, as if part of the host work the trace
shows between iterations (the bootstrap's own, say) did not stay beside the graph. This scales
the part of that time left eager, or takes a constant off it, in every committed row, and counts full_iteration's hits as ``bench/unseen_eval.py``
does: on the H100 and H200 sets timed as tune times now, and on every set. Then, per host-bound
row, the constant that would have made its prediction exact.

    python bench/host_between_probe.py [--json]
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor import predict as pr  # noqa: E402
from paired_vs_predicted import compare  # noqa: E402
from unseen_eval import NOW, NOW_H200, RESULTS, SETS, now_keep  # noqa: E402

SCOPE = "full_iteration"
FACTORS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5)
OFFSETS_MS = (0.01, 0.02, 0.03)


def corrected(row: dict, factor: float = 1.0, offset_ms: float = 0.0) -> dict:
    """The row with the host work it leaves eager between iterations scaled by ``factor`` and
    ``offset_ms`` taken off (never below 0): the traced time between iterations less the
    zero_grad calls that patch moves into the graph, which stay as they are (the prediction
    takes them out again). Rows of a graph of one micro-step are left alone: their in-step
    host time is the period less the phases, which a shorter time between would lengthen."""
    between = pr._value(row, "between_ms")
    if not between == between or pr._value(row, "per_micro_step", 0.0) > 0:   # nan: no such phase
        return row
    zero_grad = pr._value(row, "zero_grad_ms", 0.0) if pr._value(row, "zero_grad_in_graph", 0.0) > 0 else 0.0
    zero_grad = min(zero_grad, between) if zero_grad == zero_grad else 0.0
    return {**row, "between_ms": zero_grad + max((between - zero_grad) * factor - offset_ms, 0.0)}


def hits(model: dict, factor: float = 1.0, offset_ms: float = 0.0) -> dict:
    """{'H100' | 'H200' | 'all': [hits, measurements]} of full_iteration with the correction."""
    out = {"H100": [0, 0], "H200": [0, 0], "all": [0, 0]}
    for _, rows, results, scope, tolerance in SETS:
        if scope != SCOPE:
            continue
        read = [corrected(r, factor, offset_ms) for r in pr.read_dataset(RESULTS / rows)]
        found = compare(read, RESULTS / results, scope, model, tolerance, now_keep(rows))["paired"]
        keys = ["all"] + (["H100"] if rows.startswith(NOW) else []) + (["H200"] if rows.startswith(NOW_H200) else [])
        for key in keys:
            out[key] = [a + b for a, b in zip(out[key], found)]
    return out


def needed_offsets(model: dict) -> list:
    """(workload, GPU, ms) for every committed row whose full_iteration host side sets the
    predicted time: what to take off its traced time between iterations (untraced clock scaled
    back to the trace's) for the prediction to equal tune's measured time. Both signs mean no
    constant fits."""
    out = []
    for _, rows, _, scope, _ in SETS:
        if scope != SCOPE:
            continue
        for row in pr.read_dataset(RESULTS / rows):
            measured = pr._value(row, "full_iteration_ms")
            side = pr.physical(row, SCOPE, model)
            period = pr._value(row, "period_ms")
            if not measured > 0 or side["host_ms"] < side["gpu_ms"] or not period > 0:
                continue
            scale = min(1.0, pr.eager_ms(row, model)[0] / period)
            out.append((row["workload"], row.get("gpu", ""), (side["host_ms"] - max(measured, side["gpu_ms"])) / scale))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    model = pr.load_model()
    found = {f"x{f:g}": hits(model, factor=f) for f in FACTORS}
    found.update({f"-{o * 1e3:g} us": hits(model, offset_ms=o) for o in OFFSETS_MS})
    offsets = needed_offsets(model)
    if args.json:
        print(json.dumps({"hits": found, "needed_offsets_ms": offsets}, indent=1))
        return
    for label, counts in found.items():
        print(f"between iterations {label:7s} " + "; ".join(f"{k} {h} of {n}" for k, (h, n) in counts.items()))
    values = sorted(ms for *_, ms in offsets)
    print(f"{len(values)} host-bound rows: the offset each needs runs {values[0]:.3f} to {values[-1]:.3f} ms")


if __name__ == "__main__":
    main()
