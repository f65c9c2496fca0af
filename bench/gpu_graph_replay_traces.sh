#!/bin/bash
# Where does a full-iteration graph's time go? Each corpus script's full_iteration rewrite (as
# `cg-advise patch` prints it) is run under Nsight Systems without the bootstrap: with
# --cuda-graph-trace=graph each replay is one GRAPH_TRACE row (its GPU span), with =node its
# kernels appear one by one (the gaps between them inside the replay). The exports are read by
# bench/graph_replay_split.py beside the profile's prediction of the same loop.
# Usage (GPU, nsys on PATH): CORPUS="loss_after_loop cifar_tutorial" NODE="cifar_tutorial" \
#   bash bench/gpu_graph_replay_traces.sh OUT [STEPS]
set -u
out=${1:?OUTDIR}; steps=${2:-1500}
mkdir -p "$out"
for name in ${CORPUS:-}; do
  python3 -c "import sys; from tuner.patch import make_patch; \
sys.stdout.write(make_patch('tests/corpus/$name.py', 'full_iteration').patched)" > "$out/$name.py" || continue
  modes=graph; [[ " ${NODE:-} " == *" $name "* ]] && modes="graph node"
  for mode in $modes; do
    CG_STEPS=$steps timeout 90 nsys profile -t cuda -s none --cpuctxsw=none --cuda-graph-trace=$mode \
      -o "$out/${name}_$mode" --force-overwrite true python3 "$out/$name.py" > "$out/${name}_$mode.log" 2>&1
    nsys export --type sqlite --force-overwrite true -o "$out/${name}_$mode.sqlite" "$out/${name}_$mode.nsys-rep" \
      >> "$out/${name}_$mode.log" 2>&1
    rm -f "$out/${name}_$mode.nsys-rep"
    echo "$name $mode: done at $SECONDS s"
  done
done
