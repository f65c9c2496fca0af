#!/bin/bash
# Captures the sample traces on a GPU machine (run after `source .devkit/nsys-env.sh`).
# Usage: bash bench/gpu_capture_samples.sh OUTDIR
set -u
out=${1:?OUTDIR}
mkdir -p "$out/traces"
W=bench/workloads/train_mlp.py
NSYS_COMMON="-t cuda,nvtx -s none --cpuctxsw=none --force-overwrite true"
declare -A RUNS=(
  [launch_eager]="--width 256 --depth 16 --batch 64"
  [launch_graphed]="--width 256 --depth 16 --batch 64 --graph full --nvtx-step"
  [compute_eager]="--width 4096 --depth 6 --batch 8192 --steps 20"
  [compute_graphed]="--width 4096 --depth 6 --batch 8192 --steps 20 --graph full"
  [mixed_eager]="--width 256 --depth 16 --batch 2048 --big 16384"
  [sync_eager]="--width 256 --depth 16 --batch 64 --sync"
  [infer_eager]="--width 256 --depth 16 --batch 64 --inference --steps 60"
)
{
  echo "gpu: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
  echo "driver: $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)')"
  echo "nsys: $(nsys --version)"
} > "$out/env.txt"
cat "$out/env.txt"
for name in "${!RUNS[@]}"; do
  args=${RUNS[$name]}
  cmd="nsys profile $NSYS_COMMON --cuda-graph-trace=graph -o $out/traces/$name python3 -m advisor.inject $W $args"
  echo "== $name: $cmd" | tee -a "$out/commands.txt"
  $cmd > "$out/traces/$name.log" 2>&1 || { echo "FAILED $name"; tail -5 "$out/traces/$name.log"; }
done
# node-level graph trace and an NVTX-only trace (no CUDA activity recorded)
cmd="nsys profile $NSYS_COMMON --cuda-graph-trace=node -o $out/traces/launch_graphed_node python3 -m advisor.inject $W --width 256 --depth 16 --batch 64 --graph full"
echo "== launch_graphed_node: $cmd" | tee -a "$out/commands.txt"; $cmd > "$out/traces/launch_graphed_node.log" 2>&1
cmd="nsys profile -t nvtx -s none --cpuctxsw=none --force-overwrite true -o $out/traces/nvtx_only python3 -m advisor.inject $W --steps 10"
echo "== nvtx_only: $cmd" | tee -a "$out/commands.txt"; $cmd > "$out/traces/nvtx_only.log" 2>&1
for rep in "$out"/traces/*.nsys-rep; do
  base=${rep%.nsys-rep}
  nsys export --type sqlite --force-overwrite true -o "$base.sqlite" "$rep" > /dev/null 2>&1 || echo "export failed: $rep"
  nsys stats --report cuda_gpu_kern_sum --format csv --force-export false -o "$base" "$base.sqlite" > /dev/null 2>&1
done
ls -la "$out/traces"
# untraced timings (CUDA events, median) of every workload, eager vs graphed
for name in launch_eager launch_graphed compute_eager compute_graphed mixed_eager sync_eager infer_eager; do
  t=$(python3 $W ${RUNS[$name]} --steps 200 --time 2>&1 | tail -1)
  echo "$name $t" | tee -a "$out/untraced.txt"
done
