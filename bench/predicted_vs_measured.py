"""Per workload: the model's predicted speedup of each measured scope against tune's.

    python bench/predicted_vs_measured.py DATASET.csv [--model MODEL.json] [--cv]

Without --cv the given (default: shipped) model predicts every row: for a dataset of scripts
it never saw (collected with bench/collect_dataset.py on other scripts, built with
bench/build_dataset.py), that is the check of unseen workloads. With --cv each family is
predicted by a model fitted without it (what `cg-advise model eval` summarises).
"""

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisor import predict as pr  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--cv", action="store_true")
    args = parser.parse_args()
    rows = pr.read_dataset(args.dataset)
    if args.cv:
        results = pr.cross_validate(rows, pr.residual_choice(rows))
        predicted = {s: results[s]["predicted"] for s in pr.SCOPES}
    else:
        model = pr.load_model(args.model)
        predicted = {s: {} for s in pr.SCOPES}
        for row in rows:
            out = pr.predict(model, row)
            for s in pr.SCOPES:
                if "speedup" in out.get(s, {}):
                    predicted[s][row["workload"]] = out[s]["speedup"]
    within, total = {s: 0 for s in pr.SCOPES}, {s: 0 for s in pr.SCOPES}
    graphed, same_eager = {s: 0 for s in pr.SCOPES}, {s: 0 for s in pr.SCOPES}
    within_25 = {s: 0 for s in pr.SCOPES}   # compile's own target
    model = pr.load_model(args.model)   # for the eager time the predictions start from
    print(f"{'workload':34s} {'eager source':>26s}  " + "  ".join(f"{s:>24s}" for s in pr.SCOPES))
    for row in rows:
        cells = []
        for s in pr.SCOPES:
            measured, guess = pr.measured_speedup(row, s), predicted[s].get(row["workload"], math.nan)
            if math.isfinite(measured) and math.isfinite(guess):
                total[s] += 1
                within[s] += abs(guess / measured - 1) <= 0.2
                within_25[s] += abs(guess / measured - 1) <= 0.25
                # the two halves of the error: the graphed time itself, and the eager time it is
                # divided into (the profile's baseline against tune's own eager run)
                predicted_ms = pr.eager_ms(row, model)[0] / guess
                graphed[s] += abs(predicted_ms / float(row[f"{s}_ms"]) - 1) <= 0.2
                same_eager[s] += abs(float(row["eager_ms"]) / predicted_ms / measured - 1) <= 0.2
                cells.append(f"{guess:6.2f}x vs {measured:6.2f}x {guess / measured - 1:+5.0%}")
            else:
                cells.append(f"{'-':>24s}")
        source = pr.eager_ms(row, model)[1]
        print(f"{row['workload']:34s} {source:>26s}  " + "  ".join(cells))
    for s in pr.SCOPES:
        if total[s]:
            print(f"{s}: within 20 % for {within[s]} of {total[s]}"
                  + (f" (within 25 % for {within_25[s]})" if s == "compile" else "")
                  + f"; its time within 20 % for {graphed[s]}; "
                  f"with tune's eager time as the baseline, within 20 % for {same_eager[s]}")


if __name__ == "__main__":
    main()
