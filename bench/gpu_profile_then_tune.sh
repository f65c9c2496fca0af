#!/bin/bash
# Profiles each corpus script and tunes it right after (SCOPES timed paired, RUNS processes), one
# script after the other on the same machine, so that the profile's eager baseline and tune's
# timings see the same host (the lent machines' host speed differs from one start to the next).
# Then, here: python bench/unseen_rows.py OUT -o rows.csv && python bench/paired_vs_predicted.py
# rows.csv OUT --scope full_iteration
# Usage (GPU, nsys on PATH): CORPUS="cifar_tutorial in_function" bash bench/gpu_profile_then_tune.sh OUT [SECONDS] [RUNS] [SCOPES]
#   RUNS "default": tune's own number of processes (bench/gpu_paired_tune.sh)
#   After each script, the dataset rows of all that finished are written to ROWS (OUT/unseen_rows.csv;
#   empty: none), and, where SNAPSHOT names a file (\$OUT/results.tgz), OUT without its exports is
#   tarred there: a call that runs past its limit still brings back the rows of the scripts it
#   finished (the .sqlite exports, too big to bring back, are what bench/unseen_rows.py reads)
set -u
out=${1:?OUTDIR}; deadline=${2:-540}; runs=${3:-3}; scopes=${4:-full_iteration}
start=$SECONDS
rows=${ROWS-$out/unseen_rows.csv}
for name in ${CORPUS:-}; do
  [ $((SECONDS - start)) -ge "$deadline" ] && { echo "deadline: $name not profiled"; continue; }
  CORPUS=$name bash bench/gpu_profile_only.sh "$out" 100000
  CORPUS=$name bash bench/gpu_paired_tune.sh "$out" 100000 "$runs" "$scopes"
  [ -n "$rows" ] && python3 bench/unseen_rows.py "$out" -o "$rows"
  [ -n "${SNAPSHOT:-}" ] && tar czf "$SNAPSHOT" -C "$out" --exclude='*.sqlite' --exclude='*.nsys-rep' .
done
