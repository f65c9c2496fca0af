"""Dataset rows for scripts the model never saw, from what `bench/gpu_tune_check.py` left in
its OUT folder (each NAME's profile export NAME_eager.sqlite with its run record, and tune's
NAME.py.cg-advise.json): the same columns as bench/build_dataset.py, family ``unseen``, so
that ``bench/predicted_vs_measured.py`` sets the shipped model's predictions beside tune's
measurements.

    python bench/gpu_tune_check.py --out OUT --set corpus --scopes full_iteration,fwd_bwd --only A,B,...
    python bench/unseen_rows.py OUT [OUT2 ...] -o unseen.csv [--median-round] [--reapply]
    python bench/predicted_vs_measured.py unseen.csv
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.analysis import analyse  # noqa: E402
from advisor.trace import open_trace  # noqa: E402
from build_dataset import dataset_row, write_dataset  # noqa: E402


def median_round(record: dict) -> dict:
    """The record with its calibration's host costs recomputed as the median of its recorded
    rounds: what advisor/calibrate.py keeps now, for records of the day it kept the lowest."""
    calibration = dict(record.get("calibration") or {})
    for key in ("eager_launch_us", "graph_launch_us"):
        rounds = calibration.get(f"{key}_rounds")
        if rounds:
            calibration[key] = statistics.median(rounds)
    return {**record, "calibration": calibration}


def reapplied(record: dict, script: Path) -> dict:
    """The record with the scopes as today's patch applies them to ``script`` (static, no GPU):
    for records taken before the run record said what patch does with the loop's zero_grad."""
    from advisor.runrecord import applied_scopes

    return {**record, "applied": applied_scopes(script)}


def row_of(folder: Path, name: str, recompute: bool = False, reapply: bool = False, family: str = "unseen") -> dict:
    summary = analyse(open_trace(folder / f"{name}_eager.sqlite")).main.summary
    record = json.loads((folder / f"{name}_eager.cg-advise-run.json").read_text())
    if recompute:
        record = median_round(record)
    if reapply:
        record = reapplied(record, folder / f"{name}.py")
    tuned = json.loads((folder / f"{name}.py.cg-advise.json").read_text())
    measured = {r["scope"]: {"ms": r.get("ms_per_iter"), "status": r.get("status", "not measured")}
                for r in tuned["rows"]}
    return dataset_row({"workload": name, "family": family, "shape": "script", "optimizer": ""}, summary, record,
                       tuned["eager_ms"], measured)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--median-round", action="store_true",
                        help="Recompute each calibration's host costs as the median of its rounds.")
    parser.add_argument("--reapply", action="store_true",
                        help="Recompute the scopes as today's patch applies them to OUT/NAME.py.")
    parser.add_argument("--family", default="unseen",
                        help="The rows' family (the cross-validation's group): `script` for rows that join a dataset.")
    args = parser.parse_args()
    found = [(folder, p.name[:-len("_eager.sqlite")]) for folder in args.folders
             for p in sorted(folder.glob("*_eager.sqlite"))
             if (folder / p.name.replace("_eager.sqlite", ".py.cg-advise.json")).exists()]
    if not found:
        raise SystemExit(f"unseen_rows: no NAME_eager.sqlite with its NAME.py.cg-advise.json in "
                         f"{', '.join(map(str, args.folders))}")
    write_dataset(args.output, [row_of(folder, name, args.median_round, args.reapply, args.family)
                                for folder, name in found])
    print(f"{args.output}: {len(found)} scripts", file=sys.stderr)


if __name__ == "__main__":
    main()
