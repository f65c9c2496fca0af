#!/bin/bash
# Other people's exports, end to end: each corpus script profiled with a plain `nsys profile`
# (no cg-advise bootstrap, no NVTX: its iterations are the step its kernels repeat), then with
# `cg-advise profile`, then tuned (SCOPES timed paired, one process), one script after the
# other on the same machine. Then, here:
#   python bench/plain_vs_measured.py OUT        (each export's prediction beside tune's measurement)
# Usage (GPU, after `source .devkit/nsys-env.sh`): CORPUS="basic_for cifar_tutorial" bash bench/gpu_plain_exports.sh OUT [SECONDS] [SCOPES]
set -u
out=${1:?OUTDIR}; deadline=${2:-480}; scopes=${3:-full_iteration,fwd_bwd}
mkdir -p "$out"
start=$SECONDS
for name in ${CORPUS:-}; do
  [ $((SECONDS - start)) -ge "$deadline" ] && { echo "deadline: $name not run"; continue; }
  cp "tests/corpus/$name.py" "$out/$name.py"
  nsys profile -t cuda,nvtx -s none --cpuctxsw=none --force-overwrite true --cuda-graph-trace=graph \
    -o "$out/${name}_plain" python3 "$out/$name.py" > "$out/$name.plain.log" 2>&1
  nsys export --type sqlite --force-overwrite true -o "$out/${name}_plain.sqlite" "$out/${name}_plain.nsys-rep" > /dev/null 2>&1 \
    || echo "export failed: $name"
  python3 -m advisor.cli profile --force --output-dir "$out" -o "${name}_eager" "$out/$name.py" > "$out/$name.profile.log" 2>&1
  python3 -m advisor.cli tune --scopes "$scopes" --runs 1 --json "$out/$name.py" > "$out/$name.tune.json" 2> "$out/$name.tune.log"
  echo "$name: done at $((SECONDS - start)) s"
done
