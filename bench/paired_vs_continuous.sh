#!/usr/bin/env bash
# Does tune's paired timing (graphed and eager windows of 10 steps, alternating in one process)
# read a full_iteration graph's ms/iteration as a loop that replays on and on does? Each
# script's committed full_iteration rewrite (tests/patch_golden/NAME.full_iteration.out.py) is
# timed by the harness twice, paired and not, and the original script once (eager), three
# rounds (ROUNDS), CG_STEPS long enough for 3 s of timing.
#
#   SCRIPTS="gan_two_optimizers rnn_hidden_state" bash bench/paired_vs_continuous.sh OUT
set -euo pipefail
out=${1:?usage: paired_vs_continuous.sh OUT}
mkdir -p "$out"
export CG_STEPS=${CG_STEPS:-3000}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for name in ${SCRIPTS:-gan_two_optimizers rnn_hidden_state cifar_tutorial}; do
    work=$(mktemp -d)
    cp tests/corpus/"$name".py "$work/$name.py"
    cp tests/patch_golden/"$name".full_iteration.out.py "$work/${name}_graphed.py"
    for mode in continuous paired; do
      paired=false; [ "$mode" = paired ] && paired=true
      CG_TUNE_SETTINGS="{\"paired\": $paired, \"to_end\": false, \"min_seconds\": 3.0}" \
        python -m tuner.harness "$out/$name.$mode.$round.json" "$work/${name}_graphed.py" > /dev/null 2>&1 || true
    done
    CG_TUNE_SETTINGS='{"to_end": false, "min_seconds": 3.0}' \
      python -m tuner.harness "$out/$name.eager.$round.json" "$work/$name.py" > /dev/null 2>&1 || true
    rm -rf "$work"
  done
done
python - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
names = sorted({os.path.basename(p).split(".")[0] for p in glob.glob(f"{out}/*.json")})
print(f"{'script':22s} {'eager':>8s} {'continuous':>11s} {'paired':>8s} {'paired/cont':>11s}  (ms/iteration, median of rounds)")
for name in names:
    def ms(mode):
        found = [json.load(open(p)).get("ms_per_iter") for p in sorted(glob.glob(f"{out}/{name}.{mode}.*.json"))]
        return [m for m in found if m]
    e, c, p = ms("eager"), ms("continuous"), ms("paired")
    if e and c and p:
        print(f"{name:22s} {statistics.median(e):8.3f} {statistics.median(c):11.3f} {statistics.median(p):8.3f} "
              f"{statistics.median(p) / statistics.median(c):11.2f}   each: {' '.join(f'{x:.3f}' for x in c)} | {' '.join(f'{x:.3f}' for x in p)}")
PY
