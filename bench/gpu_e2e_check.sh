#!/bin/bash
# End-to-end check of the torch.profiler backend and the HTML report on a GPU machine (run from
# the checkout root with nsys set up): profile --backend torch / nsys with --html, the automatic
# fallback when no usable nsys is found, tune --html from the profile, report combining both.
# Usage: bash bench/gpu_e2e_check.sh OUTDIR
set -u
out=${1:?OUTDIR}; work=$(mktemp -d); mkdir -p "$out"
W=bench/workloads/train_mlp.py
py=$(command -v python3)
step() { local name=$1; shift; echo "== $name: $*" | tee -a "$out/commands.txt"; "$@" > "$out/$name.out" 2> "$out/$name.err"; echo "exit $?" | tee -a "$out/$name.err"; tail -4 "$out/$name.err"; }
step torch_launch "$py" -m advisor.cli profile --backend torch --html "$out/torch_launch.html" --output-dir "$work" -o torch_launch $W --steps 100
step torch_graphed "$py" -m advisor.cli profile --backend torch --json --output-dir "$work" -o torch_graphed $W --graph full --steps 100
step nsys_launch "$py" -m advisor.cli profile --html "$out/nsys_launch.html" --output-dir "$work" -o nsys_launch bench/workloads/zoo_scripts/zoo_plain.py mlp_w256_d8_b64 --steps 200
# no usable nsys: PATH without it and without the kit's libraries
step auto_fallback env -u LD_LIBRARY_PATH PATH=/usr/local/bin:/usr/bin:/bin "$py" -m advisor.cli profile --json --output-dir "$work" -o auto $W --steps 100
step tune "$py" -m advisor.cli tune --scopes full_iteration,fwd_bwd --iterations 40 --repeats 3 --html "$out/tune.html" --trace "$work/nsys_launch.sqlite" bench/workloads/zoo_scripts/zoo_plain.py mlp_w256_d8_b64 --steps 200
step report "$py" -m advisor.cli report "$work/nsys_launch.sqlite" bench/workloads/zoo_scripts/zoo_plain.py.cg-advise.json -o "$out/combined.html"
ls -la "$work" "$out" | tee "$out/files.txt"
cp "$work"/*.cg-advise-run.json "$out/" 2>/dev/null
