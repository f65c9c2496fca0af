#!/bin/bash
# The same workloads profiled with both backends, side by side (issue #15's evidence):
# `cg-advise profile --backend nsys` and `--backend torch` (torch.profiler, Kineto: the same
# injected bootstrap with CG_ADVISE_KINETO_TRACE), each with the default window (50 warm-up
# iterations, the second half timed untraced, 20 recorded). Compare with
# `python bench/backends_compare.py OUTDIR`.
# Usage (on a GPU machine with nsys on PATH): bash bench/gpu_backends.sh OUTDIR [WARMUP ITERATIONS]
# ONLY="mlp_launch gpt_small" picks workloads; REPEAT=1 profiles each with nsys a second time
# (OUTDIR/nsys_repeat): how far two nsys runs of one script disagree, the floor under any
# tolerance between the backends.
set -u
out=${1:?OUTDIR}; warmup=${2:-50}; iterations=${3:-20}
mkdir -p "$out/nsys" "$out/kineto"
[ "${REPEAT:-0}" = 1 ] && mkdir -p "$out/nsys_repeat"
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
[ -n "${ONLY:-}" ] && read -r -a NAMES <<< "$ONLY"
for name in "${NAMES[@]}"; do
  args=${RUNS[$name]}
  echo "== $name: $args"
  python3 -m advisor.cli profile --backend nsys --json --force --warmup "$warmup" --iterations "$iterations" \
    --output-dir "$out/nsys" -o "$name" $args > "$out/$name.nsys.json" 2> "$out/$name.nsys.log" \
    || { echo "nsys profile exit $?"; tail -3 "$out/$name.nsys.log"; }
  python3 -m advisor.cli profile --backend torch --json --force --warmup "$warmup" --iterations "$iterations" \
    --output-dir "$out/kineto" -o "$name" $args > "$out/$name.torch.json" 2> "$out/$name.torch.log" \
    || { echo "torch profile exit $?"; tail -3 "$out/$name.torch.log"; }
  ls -la "$out/kineto/$name.kineto.json.gz" 2>/dev/null
  if [ "${REPEAT:-0}" = 1 ]; then
    python3 -m advisor.cli profile --backend nsys --json --force --warmup "$warmup" --iterations "$iterations" \
      --output-dir "$out/nsys_repeat" -o "$name" $args > "$out/$name.nsys_repeat.json" 2> "$out/$name.nsys_repeat.log" \
      || { echo "nsys repeat exit $?"; tail -3 "$out/$name.nsys_repeat.log"; }
  fi
done
