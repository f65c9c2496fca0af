#!/bin/bash
# Exports of a loop annotated as users annotate their own (bench/workloads/user_nvtx.py), under a
# plain `nsys profile`, no cg-advise bootstrap: what `cg-advise analyze` meets in other people's
# exports. Run after `source .devkit/nsys-env.sh` (see CONTRIBUTING.md).
# Usage: bash bench/gpu_user_nvtx.sh OUTDIR
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
{
  echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')"
  echo "nsys: $(nsys --version)"
} > "$out/env.txt"
# small runs (2 epochs of 12 steps): the exports are committed to sample_traces/
for ranges in step epoch phases ops none epoch+step; do
  cmd="nsys profile -t cuda,nvtx -s none --cpuctxsw=none --force-overwrite true --cuda-graph-trace=graph -o $out/user_nvtx_${ranges/+/_} python3 bench/workloads/user_nvtx.py --ranges $ranges --epochs 2 --steps-per-epoch 12"
  name=user_nvtx_${ranges/+/_}
  echo "$cmd" >> "$out/commands.txt"
  $cmd > "$out/$name.log" 2>&1 || { echo "FAILED $ranges"; tail -5 "$out/$name.log"; }
  nsys export --type sqlite --force-overwrite true -o "$out/$name.sqlite" "$out/$name.nsys-rep" > /dev/null 2>&1 \
    || echo "export failed: $ranges"
done
# a hand-written update (no optimizer kernels): an epoch's steps told apart by autograd's thread
cmd="nsys profile -t cuda,nvtx -s none --cpuctxsw=none --force-overwrite true --cuda-graph-trace=graph -o $out/user_nvtx_epoch_hand python3 bench/workloads/user_nvtx.py --ranges epoch --hand-update --epochs 2 --steps-per-epoch 12"
echo "$cmd" >> "$out/commands.txt"
$cmd > "$out/user_nvtx_epoch_hand.log" 2>&1 || echo "FAILED epoch_hand"
nsys export --type sqlite --force-overwrite true -o "$out/user_nvtx_epoch_hand.sqlite" "$out/user_nvtx_epoch_hand.nsys-rep" > /dev/null 2>&1
ls -la "$out"
