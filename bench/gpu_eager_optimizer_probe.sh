#!/bin/bash
# A full-iteration graph that leaves the optimizer step eager (a scheduler, a GradScaler):
# what it costs with the helper of before (which made the eager optimizer capturable) and now
# (which leaves it as the script built it), paired tune timings of each, and an Nsight Systems
# trace of the patched script, to see where the host waits beside the replays.
#
#   bash bench/gpu_eager_optimizer_probe.sh OUT OLD_CHECKOUT [WORKLOAD:SHAPE ...]
#
# OLD_CHECKOUT: a copy of advisor/ and tuner/ of the commit before (git archive HEAD~N advisor
# tuner | tar -x -C DIR). On a GPU, nsys on PATH (source .devkit/nsys-env.sh on the lent machine).
set -u
OUT=${1:?OUT}; OLD=${2:?OLD_CHECKOUT}; shift 2
WORKLOADS=${*:-hf_bert_h64_l2_b8_t32:hf hf_gpt2_d768_l12_b4_t512:hf mlp_w256_d16_b64:amp}
ZOO=bench/workloads/zoo_scripts
mkdir -p "$OUT"
for item in $WORKLOADS; do
    workload=${item%%:*}; shape=${item##*:}
    for version in old new; do
        path=$PWD; [ "$version" = old ] && path=$OLD
        start=$(date +%s)
        PYTHONPATH="$path:${PYTHONPATH:-}" python -m advisor.cli tune --json --scopes full_iteration --warmup 10 \
            --iterations 40 --repeats 3 --budget 300 "$ZOO/zoo_$shape.py" "$workload" --steps 200 \
            > "$OUT/tune_${workload}_${shape}_$version.json" 2> "$OUT/tune_${workload}_${shape}_$version.err"
        echo "$workload $shape $version: rc $? in $(( $(date +%s) - start )) s"
    done
done
# the trace of the first workload's patched script, with the helper of before (as the dataset measured it)
item=${WORKLOADS%% *}; workload=${item%%:*}; shape=${item##*:}
patched="$ZOO/zoo_${shape}_patched.py"
cp "$ZOO/zoo_$shape.py" "$patched"
PYTHONPATH="$OLD:${PYTHONPATH:-}" python -m advisor.cli patch --scope full_iteration --apply "$patched" >/dev/null
nsys profile -s none --cpuctxsw=none --trace cuda,nvtx,osrt --cuda-graph-trace=graph -f true \
    -o "$OUT/patched_$workload" python "$patched" "$workload" --steps 60 > "$OUT/nsys.log" 2>&1
nsys export --type sqlite -f true -o "$OUT/patched_$workload.sqlite" "$OUT/patched_$workload.nsys-rep" >> "$OUT/nsys.log" 2>&1
rm -f "$OUT"/*.nsys-rep "$patched" "$patched.orig"
ls -la "$OUT"
