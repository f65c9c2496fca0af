#!/bin/bash
# torch.profiler traces as users take them, not as cg-advise does (issue #15: "a torch.profiler
# trace of your own"): bench/workloads/user_profiler_loop.py with a schedule, prof.step() and
# tensorboard_trace_handler, eager (plain, and with shapes, memory and stacks) and as a
# whole-step CUDA graph; each analysed by `cg-advise analyze`, and the same loop profiled
# without the profiler by `cg-advise profile` (nsys) for comparison.
# Usage (on a GPU machine with nsys on PATH): bash bench/gpu_user_traces.sh OUTDIR
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
L=bench/workloads/user_profiler_loop.py
work=$(mktemp -d)
for variant in eager:plain: eager_full:full: graphed:plain:--graphed; do
  IFS=: read -r name detail flag <<< "$variant"
  python3 $L "$work/$name" --detail "$detail" $flag > "$out/$name.log" 2>&1 || { echo "$name: exit $?"; tail -3 "$out/$name.log"; }
  trace=$(ls "$work/$name"/*.pt.trace.json.gz 2>/dev/null | head -1)
  [ -n "$trace" ] || { echo "$name: no trace"; continue; }
  cp "$trace" "$out/user_$name.pt.trace.json.gz"
  python3 -m advisor.cli analyze --json "$out/user_$name.pt.trace.json.gz" > "$out/user_$name.analysis.json" \
    2> "$out/user_$name.analyze.log"
  echo "$name: analyze exit $? ($(du -k "$out/user_$name.pt.trace.json.gz" | cut -f1) KiB)"
  [ "$detail" = full ] && continue
  python3 -m advisor.cli profile --backend nsys --json --force --output-dir "$work/nsys" -o "user_$name" \
    $L "$work/none" --detail none --steps 120 $flag > "$out/user_$name.nsys.json" 2> "$out/user_$name.nsys.log"
  echo "$name: nsys profile exit $?"
done
tar czf "$out/nsys_exports.tgz" -C "$work/nsys" . 2>/dev/null
rm -rf "$work"
