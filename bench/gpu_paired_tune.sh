#!/bin/bash
# Tunes corpus scripts (SCOPES, fwd_bwd by default; timed paired) in RUNS processes each, so that
# bench/noise_floor.py can set the paired speedups' spread beside the cross-process ones that
# the same result files hold (eager_run_ms over run_ms), and bench/unseen_rows.py can set the
# predictions of a profile of the same scripts beside them.
# Usage (GPU): CORPUS="amp_scaler cifar_tutorial" bash bench/gpu_paired_tune.sh OUT [SECONDS] [RUNS] [SCOPES]
#   RUNS "default": no --runs, tune's own choice (3 processes for a scope timed in one pair, else 1)
#   CORPUS_DIR=DIR[:DIR...]: where the CORPUS scripts are (tests/corpus, then bench/workloads/unseen_*, by default)
set -u
source "$(dirname "$0")/corpus_script.sh"
out=${1:?OUTDIR}; deadline=${2:-540}; runs=${3:-3}; scopes=${4:-fwd_bwd}
mkdir -p "$out"
start=$SECONDS
for name in ${CORPUS:-}; do
  [ $((SECONDS - start)) -ge "$deadline" ] && { echo "deadline: $name not tuned"; continue; }
  script=$(corpus_script "$name") || continue
  cp "$script" "$out/$name.py"
  runs_arg=(--runs "$runs"); [ "$runs" = default ] && runs_arg=()
  python3 -m advisor.cli tune --scopes "$scopes" "${runs_arg[@]}" --json "$out/$name.py" > "$out/$name.tune.json" 2> "$out/$name.tune.log"
  echo "$name: exit $? at $((SECONDS - start)) s"
done
