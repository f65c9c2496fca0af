#!/bin/bash
# Ctrl-C handling, a two-process DDP trace, and the NVTX overhead (after `source .devkit/nsys-env.sh`).
set -u
out=${1:?OUTDIR}; mkdir -p "$out/p"
W=bench/workloads/train_mlp.py
CG="python3 -m advisor.cli"
echo "=== Ctrl-C after 40 s"
timeout --preserve-status -s INT 40 $CG profile --output-dir $out/p -o cli_interrupted $W --steps 10000000 > $out/int.txt 2> $out/int.err; echo "rc=$?"
grep -E "iterations:|verdict" $out/int.txt; grep -v '^\[' $out/int.err | tail -4
echo "=== DDP, 2 processes (gloo on one GPU)"
$CG profile --output-dir $out/p -o cli_ddp2 -- python3 -m torch.distributed.run --standalone --nproc_per_node 2 $W --steps 40 > $out/ddp.txt 2> $out/ddp.err; echo "rc=$?"
head -4 $out/ddp.txt; grep -A8 "Every process" $out/ddp.txt; grep -v '^\[' $out/ddp.err | tail -3
echo "=== NVTX overhead, unprofiled"
python3 bench/nvtx_overhead.py --rounds 10
