"""Would the untraced host time of the phases a full-iteration graph leaves eager predict the
graphed time better than the traced estimate? (#12; tried, not adopted.) And what the
zero_grad calls between iterations, which patch moves into the graph, change ("zero_grad
eager": the traced estimate that leaves them in the host work, as the model did before).

The bootstrap times, in the untraced warm-up of the eager process, the host time after the
last backward (to the step's end) and between iterations. Here they replace the traced host
side of ``advisor.predict.physical`` for ``full_iteration`` (between, plus after the backward
where the optimizer stays eager), the GPU side and the sync share unchanged, and both are set
against tune's measured graphed time. Reads the folder ``bench/gpu_profile_only.sh`` writes:
corpus scripts as NAME_eager.sqlite + run record with tune's NAME.py.cg-advise.json copied
beside them, zoo rows as zoo/NAME_SHAPE.sqlite measured in the dataset CSV.

    python bench/untraced_host_check.py OUT [--dataset advisor/data/dataset_h100.csv] [--median-round] [--reapply]
    python bench/untraced_host_check.py --committed

``--committed``: the same on the committed sets timed as tune times now (``unseen_eval.NOW``,
the H100, and ``NOW_H200``), from their dataset rows and run records, no trace needed: tune's
paired graphed time, and the speedup, within 20 % for each host side.

The traces themselves are not committed (megabytes each); their run records and this script's
output are, in bench/results/unseen_corpus_h100/second_profile/.
"""

import argparse
import csv
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor import predict as pr  # noqa: E402
from advisor import runrecord  # noqa: E402
from advisor.analysis import analyse  # noqa: E402
from advisor.trace import open_trace  # noqa: E402
from unseen_rows import median_round, reapplied  # noqa: E402


def cases(folder: Path, dataset: Path):
    """(name, trace, run record, tune's full_iteration ms, script) of every profiled workload."""
    for record in sorted(folder.glob("*_eager.cg-advise-run.json")):
        name = record.name[:-len("_eager.cg-advise-run.json")]
        tuned = folder / f"{name}.py.cg-advise.json"
        if tuned.exists():
            rows = json.loads(tuned.read_text())["rows"]
            ms = next((r.get("ms_per_iter") for r in rows if r["scope"] == "full_iteration"), None)
            yield name, folder / f"{name}_eager.sqlite", record, ms, folder / f"{name}.py"
    measured = {r["workload"]: r for r in csv.DictReader(dataset.open())}
    for record in sorted((folder / "zoo").glob("*.cg-advise-run.json")):
        safe = record.name[:-len(".cg-advise-run.json")]
        workload = "+".join(safe.rsplit("_", 1))
        if workload in measured:
            script = ROOT / "bench" / "workloads" / "zoo_scripts" / f"zoo_{workload.rsplit('+', 1)[1]}.py"
            yield workload, folder / "zoo" / f"{safe}.sqlite", record, pr._value(measured[workload], "full_iteration_ms"), script


def untraced_ms(f: dict, untraced: dict, model: dict, traced: dict) -> float:
    """full_iteration's time with the host side timed untraced instead of scaled from the trace."""
    leaves_eager = pr.optimizer_left_out(f)
    # less the zero_grad calls between iterations, where patch takes the loop's statement out
    taken = untraced.get("zero_grad_between_ms_per_iteration", 0.0) if pr._value(f, "zero_grad_in_graph", 0.0) > 0 else 0.0
    outside = max(untraced.get("between_ms_per_iteration", 0.0) - taken, 0.0)
    if leaves_eager:
        outside += untraced.get("after_backward_ms_per_iteration", 0.0)
    launch = pr._value(f, "graph_launch_us", model["calibration"]["graph_launch_us"]) / 1e3 + pr.helper_ms(f)
    # the eager calls' own edges, measured bare by the calibration, where the graph takes in the whole step
    host = max(outside * model.get("baseline_factor", 1.0) - pr.step_edges_ms(f), 0.0) + launch
    return pr.graphed_ms(f, traced["gpu_ms"], host, model, "full_iteration")


def committed(model: dict) -> dict:
    """{GPU: {host side: [graphed times within 20 %, speedups within 20 %, measurements]}} over
    the sets timed as tune times now, each full_iteration row beside its run record."""
    from paired_vs_predicted import close, paired_speedups
    from unseen_eval import NOW, NOW_H200, tuned_rows

    out = {}
    scope = "full_iteration"
    for gpu, prefixes in (("H100", NOW), ("H200", NOW_H200)):
        counts = out[gpu] = {"traced": [0, 0, 0], "untraced": [0, 0, 0]}
        for f, record, measured, tolerance in tuned_rows(scope, prefixes):
            untraced = record.get("untraced", {})
            if not measured.get("measured_ms") or "between_ms_per_iteration" not in untraced:
                continue
            traced = pr.physical(f, scope, model)
            predicted = pr.predict(model, f).get(scope, {}).get("speedup")
            if predicted is None:
                continue   # refused or withheld: no prediction to compare
            speedups = paired_speedups(measured, scope)
            for how, ms in (("traced", traced["ms"]), ("untraced", untraced_ms(f, untraced, model, traced))):
                # the prediction's speedup (with the steps it runs eagerly), the host side swapped
                speedup = predicted * traced["ms"] / ms
                counts[how][0] += close(ms, measured["measured_ms"], tolerance)
                counts[how][1] += sum(close(speedup, s, tolerance) for s in speedups)
                counts[how][2] += len(speedups)
    return out


def main():
    if sys.argv[1:] == ["--committed"]:
        for gpu, sides in committed(pr.load_model()).items():
            print(f"{gpu}, timed as tune times now, full_iteration: " + "; ".join(
                f"host side {how}: graphed time within 20 % for {g}, speedup for {h}, of {n}"
                for how, (g, h, n) in sides.items()))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--dataset", type=Path, default=ROOT / "advisor" / "data" / "dataset_h100.csv")
    parser.add_argument("--median-round", action="store_true",
                        help="Recompute each calibration's host costs as the median of its rounds.")
    parser.add_argument("--reapply", action="store_true",
                        help="Recompute the scopes as today's patch applies them to each script.")
    args = parser.parse_args()
    model = pr.load_model()
    within = {"traced": 0, "zero_grad eager": 0, "untraced": 0}
    count = 0
    print(f"{'workload':32s} {'measured':>9s} " + " ".join(f"{how:>16s}" for how in within))
    for name, trace, record_path, measured, script in cases(args.folder, args.dataset):
        record = runrecord.read(record_path)
        if args.median_round:
            record = median_round(record)
        if args.reapply:
            record = reapplied(record, script)
        untraced = record.get("untraced") or {}
        if not measured or not math.isfinite(measured) or "between_ms_per_iteration" not in untraced:
            continue
        f = pr.features_of(analyse(open_trace(trace)).main.summary, record)
        traced = pr.physical(f, "full_iteration", model)
        guesses = {"traced": traced["ms"],
                   "zero_grad eager": pr.physical({**f, "zero_grad_ms": None}, "full_iteration", model)["ms"],
                   "untraced": untraced_ms(f, untraced, model, traced)}
        count += 1
        cells = []
        for how, ms in guesses.items():
            within[how] += abs(ms / measured - 1) <= 0.2
            cells.append(f"{ms:7.3f} ({ms / measured - 1:+5.0%})")
        print(f"{name[:32]:32s} {measured:9.3f} " + " ".join(f"{cell:>16s}" for cell in cells))
    print(f"full_iteration's graphed time within 20 % of tune's, of {count}: " +
          ", ".join(f"{how} {n}" for how, n in within.items()))


if __name__ == "__main__":
    main()
