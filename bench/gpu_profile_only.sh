#!/bin/bash
# Profiles scripts with `cg-advise profile` only (no tune): a new profile of workloads whose tune
# measurements are already on record, so that a change to what the profile records (here: the
# untraced host time after the backward and between iterations) can be checked against them.
# Corpus scripts are written as OUT/NAME_eager.sqlite + run record (bench/unseen_rows.py's
# layout); zoo rows (NAME+loader, NAME+amp) as OUT/zoo/NAME_loader.sqlite + run record.
# Usage (GPU, nsys on PATH): bash bench/gpu_profile_only.sh OUT [SECONDS]
#   CORPUS_DIR=DIR[:DIR...] (where the CORPUS scripts are: tests/corpus, then bench/workloads/unseen_*, by default)
#   CORPUS="cifar_tutorial mnist_example" ZOO_ROWS="mlp_w256_d8_b64+loader cnn_c16_k4_b32_s32+amp"
#   PROFILE_ARGS="--baseline-runs 0" (options for every profile; 0: no bare processes, as profile ran before 2026-11-29)
set -u
source "$(dirname "$0")/corpus_script.sh"
out=${1:?OUTDIR}; deadline=${2:-540}
mkdir -p "$out/zoo"
start=$SECONDS
for name in ${CORPUS:-}; do
  [ $((SECONDS - start)) -ge "$deadline" ] && { echo "deadline: $name not profiled"; continue; }
  script=$(corpus_script "$name") || continue
  cp "$script" "$out/$name.py"
  python3 -m advisor.cli profile --force ${PROFILE_ARGS:-} --output-dir "$out" -o "${name}_eager" "$out/$name.py" \
    > "$out/$name.profile.log" 2>&1
  echo "$name: exit $? at $((SECONDS - start)) s"
done
for row in ${ZOO_ROWS:-}; do
  [ $((SECONDS - start)) -ge "$deadline" ] && { echo "deadline: $row not profiled"; continue; }
  workload=${row%+*}; shape=${row#*+}
  python3 -m advisor.cli profile --force ${PROFILE_ARGS:-} --output-dir "$out/zoo" -o "${row/+/_}" \
    "bench/workloads/zoo_scripts/zoo_$shape.py" "$workload" --steps 200 > "$out/zoo/${row/+/_}.profile.log" 2>&1
  echo "$row: exit $? at $((SECONDS - start)) s"
done
