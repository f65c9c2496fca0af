#!/bin/bash
# bench/gpu_profile_then_tune.sh on every GPU of this machine side by side: the corpus scripts
# dealt out in turn, each GPU's share profiled and tuned one after the other on its own GPU and
# its own slice of the CPUs (a script's profile and tune see the same host). Then the dataset
# rows of everything that finished: OUT/unseen_rows.csv (the lanes write none of their own:
# they would write one file side by side).
# Usage (GPU, nsys on PATH): CORPUS="a b c ..." bash bench/gpu_profile_then_tune_parallel.sh OUT [SECONDS] [RUNS] [SCOPES]
set -u
out=${1:?OUTDIR}; deadline=${2:-540}; runs=${3:-1}; scopes=${4:-full_iteration,fwd_bwd}
gpus=$(nvidia-smi -L | wc -l); cpus=$(nproc); per=$((cpus / gpus))
read -r -a names <<< "${CORPUS:-}"
mkdir -p "$out"
for ((k = 0; k < gpus; k++)); do
  share=""
  for ((i = k; i < ${#names[@]}; i += gpus)); do share+="${names[i]} "; done
  ROWS="" CORPUS="$share" CUDA_VISIBLE_DEVICES=$k taskset -c $((k * per))-$(((k + 1) * per - 1)) \
    bash bench/gpu_profile_then_tune.sh "$out" "$deadline" "$runs" "$scopes" > "$out/gpu$k.log" 2>&1 &
done
wait
python3 bench/unseen_rows.py "$out" -o "$out/unseen_rows.csv"
