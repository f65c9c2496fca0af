#!/bin/bash
# The same workloads profiled with both backends, side by side (issue #15's evidence):
# Nsight Systems through `cg-advise profile` and torch.profiler (Kineto) through the same
# injected bootstrap (CG_ADVISE_KINETO_TRACE), each with the default window (50 warm-up
# iterations, the second half timed untraced, 20 recorded).
# Usage (on a GPU machine with nsys on PATH): bash bench/gpu_backends.sh OUTDIR [WARMUP ITERATIONS]
set -u
out=${1:?OUTDIR}; warmup=${2:-50}; iterations=${3:-20}
mkdir -p "$out/nsys" "$out/kineto"
M=bench/workloads/train_mlp.py
Z=bench/workloads/zoo_scripts
declare -a NAMES=(mlp_launch mlp_compute mlp_graphed mlp_sync mlp_infer cnn_amp gpt_small)
declare -A RUNS=(
  [mlp_launch]="$M --steps 100"
  [mlp_compute]="$M --width 4096 --depth 6 --batch 8192 --steps 75"
  [mlp_graphed]="$M --graph full --steps 100"
  [mlp_sync]="$M --sync --steps 100"
  [mlp_infer]="$M --inference --steps 100"
  [cnn_amp]="$Z/zoo_amp.py cnn_c16_k4_b32_s32 --steps 100"
  [gpt_small]="$Z/zoo_plain.py gpt_d128_l2_b8_t64 --steps 100"
)
python3 - <<'PY' > "$out/env.txt"
import torch, subprocess
print("gpu:", torch.cuda.get_device_name(0)); print("torch:", torch.__version__, torch.version.cuda)
print("nsys:", subprocess.run(["nsys", "--version"], capture_output=True, text=True).stdout.strip())
PY
cat "$out/env.txt"
for name in "${NAMES[@]}"; do
  args=${RUNS[$name]}
  echo "== $name: $args"
  python3 -m advisor.cli profile --json --force --warmup "$warmup" --iterations "$iterations" \
    --output-dir "$out/nsys" -o "$name" $args > "$out/$name.nsys.json" 2> "$out/$name.nsys.log" \
    || { echo "nsys profile exit $?"; tail -3 "$out/$name.nsys.log"; }
  CG_ADVISE_WARMUP=$warmup CG_ADVISE_ITERATIONS=$iterations CG_ADVISE_RUN_TO_END=0 \
    CG_ADVISE_KINETO_TRACE="$out/kineto/$name.json.gz" CG_ADVISE_SUMMARY="$out/kineto/$name.summary.json" \
    python3 -m advisor.inject $args > "$out/kineto/$name.log" 2>&1 || { echo "kineto exit $?"; tail -3 "$out/kineto/$name.log"; }
  ls -la "$out/kineto/$name.json.gz" 2>/dev/null
done
