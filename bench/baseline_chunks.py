"""The profile's untraced baseline, from the warm-up alone and from both chunks, against tune.

Since the bootstrap also times as many untraced iterations after the recording window as in
the warm-up, a run record holds two chunks (``untraced.chunks``, ``gpu_ms_by_chunk``). For
each script this sets the warm-up's median, the two chunks' median (the baseline now) and
tune's eager time (the median of its processes) side by side, and where the profile ran with
``--baseline-runs N``, the median of its N bare processes; and the baseline as the prediction
reads it without them: the host-clock baseline times the shipped model's ``baseline_factor``.

    python bench/baseline_chunks.py RECORDS_DIR TUNE_RESULTS_DIR
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from advisor.predict import load_model  # noqa: E402
from advisor.runrecord import measured_eager_ms  # noqa: E402

SUFFIX = "_eager.cg-advise-run.json"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("records", type=Path, help="NAME_eager.cg-advise-run.json files of cg-advise profile")
    parser.add_argument("tuned", type=Path, help="NAME.py.cg-advise.json files of tune (--runs N)")
    args = parser.parse_args()
    errors = {"warm-up": [], "both chunks": [], "as predicted without bare processes": [], "bare processes": []}
    factor = load_model().get("baseline_factor", 1.0)
    print(f"{'script':22s} {'tune eager':>10s} {'warm-up':>8s} {'after':>8s} {'both':>8s} {'x factor':>8s} {'bare':>8s}"
          "   (ms per iteration; x factor: the baseline as predicted)")
    for path in sorted(args.records.glob(f"*{SUFFIX}")):
        name = path.name[: -len(SUFFIX)]
        tuned = args.tuned / f"{name}.py.cg-advise.json"
        record = json.loads(path.read_text())
        untraced = record.get("untraced") or {}
        bare = (record.get("bare_baseline") or {}).get("ms_per_iteration")
        chunks = untraced.get("chunks") or []
        if not tuned.exists() or len(chunks) < 2 or not untraced.get("gpu_ms"):
            continue
        eager = json.loads(tuned.read_text())["eager_ms"]
        warm_up = statistics.median(untraced["gpu_ms"][: chunks[0]])
        after = statistics.median(untraced["gpu_ms"][chunks[0]:])
        both = untraced["gpu_ms_per_iteration"]
        errors["warm-up"].append(abs(warm_up / eager - 1))
        errors["both chunks"].append(abs(both / eager - 1))
        predicted = measured_eager_ms(record) * factor   # the baseline the prediction reads
        errors["as predicted without bare processes"].append(abs(predicted / eager - 1))
        if bare:
            errors["bare processes"].append(abs(bare / eager - 1))
        print(f"{name:22s} {eager:10.3f} {warm_up:8.3f} {after:8.3f} {both:8.3f} {predicted:8.3f} "
              + (f"{bare:8.3f}" if bare else f"{'-':>8s}"))
    for label, values in errors.items():
        if values:
            print(f"{label}: off tune's eager by a median {statistics.median(values):.0%}, within 20 % "
                  f"(|baseline / tune's - 1| <= 0.2, as predicted_vs_measured.py counts) "
                  f"for {sum(v <= 0.2 for v in values)} of {len(values)}, within 10 % for "
                  f"{sum(v <= 0.1 for v in values)}")


if __name__ == "__main__":
    main()
