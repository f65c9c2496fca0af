#!/bin/bash
# One dataset collector per GPU of this machine, side by side, each on its own slice of the
# workloads and its own CPUs: bash bench/collect_parallel.sh OUT DEADLINE_S [collect_dataset args...]
# Writes OUT/gpuK/{rows.jsonl,traces,log.txt}.
set -u
out=${1:?OUT}; deadline=${2:?DEADLINE_S}; shift 2
gpus=$(nvidia-smi -L | wc -l); cpus=$(nproc); per=$((cpus / gpus))
for ((k = 0; k < gpus; k++)); do
  mkdir -p "$out/gpu$k"
  CUDA_VISIBLE_DEVICES=$k taskset -c $((k * per))-$(((k + 1) * per - 1)) \
    python bench/collect_dataset.py --out "$out/gpu$k" --part $((k + 1))/$gpus --deadline "$deadline" "$@" \
    > "$out/gpu$k/log.txt" 2>&1 &
done
wait
