#!/bin/bash
# End-to-end checks of `cg-advise profile` on a GPU machine (after `source .devkit/nsys-env.sh`).
# Usage: bash bench/gpu_profile_check.sh OUTDIR
set -u
out=${1:?OUTDIR}; mkdir -p "$out/p"
W=bench/workloads/train_mlp.py
CG="python3 -m advisor.cli"
step() { echo; echo "=== $*"; }
step "launch-bound training, whole run"
$CG profile --output-dir $out/p -o cli_launch_eager $W --steps 60 > $out/launch.txt 2> $out/launch.err; echo "rc=$?"; head -8 $out/launch.txt; tail -3 $out/launch.err
step "graphed training"
$CG profile --output-dir $out/p -o cli_launch_graphed $W --graph full --steps 60 > /dev/null 2>&1; echo "rc=$?"
step "compute-bound training"
$CG profile --output-dir $out/p -o cli_compute_eager $W --width 4096 --depth 6 --batch 8192 --steps 20 > /dev/null 2>&1; echo "rc=$?"
step "window: --warmup 20 --iterations 10 of a 100000-step run"
s=$(date +%s.%N); $CG profile --output-dir $out/p -o cli_window --warmup 20 --iterations 10 --json $W --steps 100000 > $out/window.json 2> $out/window.err; echo "rc=$? wall=$(echo "$(date +%s.%N) - $s" | bc)s"
python3 -c "import json; d=json.load(open('$out/window.json')); print('iterations', d['summary']['iterations'], d['summary']['iteration_source'])"; tail -2 $out/window.err
step "python -m form, inference"
$CG profile --output-dir $out/p -o cli_infer_module -- python3 -m bench.workloads.train_mlp --inference --steps 50 > $out/infer.txt 2>&1; echo "rc=$?"; grep -E "iterations:|verdict" $out/infer.txt
step "script that crashes after 15 steps"
$CG profile --output-dir $out/p -o cli_crash $W --crash-after 15 > $out/crash.txt 2> $out/crash.err; echo "rc=$?"; grep -E "iterations:" $out/crash.txt; tail -2 $out/crash.err
step "Ctrl-C after 25 s"
timeout -s INT 25 $CG profile --output-dir $out/p -o cli_interrupted $W --steps 10000000 > $out/int.txt 2> $out/int.err; echo "rc=$?"; grep -E "iterations:" $out/int.txt; tail -2 $out/int.err
step "existing report without --force"
$CG profile --output-dir $out/p -o cli_launch_eager $W --steps 5; echo "rc=$?"
ls -la $out/p
step "NVTX overhead, unprofiled"
python3 bench/nvtx_overhead.py --rounds 7
python3 bench/nvtx_overhead.py --rounds 5 --inference
step "tests on the GPU machine"
python3 -m pytest -q -x 2>&1 | tail -3
