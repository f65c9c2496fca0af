#!/usr/bin/env bash
# Does tune's paired timing (graphed and eager windows by turns in one process) read a
# full_iteration graph's ms/iteration as a loop that replays throughout does? Each script's
# committed full_iteration rewrite (tests/patch_golden/NAME.full_iteration.out.py) is timed by
# the harness graphed throughout (continuous), in each of PAIRED_WINDOWS (below), and the
# original script eager, each in its own process, ROUNDS rounds (3), CG_STEPS long enough for 3 s
# of timing. Results: bench/results/paired_windows_h100/ (on the device, tar OUT into $OUT: only
# a few files come back one by one).
#
#   ROUNDS=2 PAIRED_WINDOWS="paired10 paired100 tune" SCRIPTS="gan_two_optimizers cifar_tutorial" \
#     bash bench/paired_vs_continuous.sh OUT
#   ROUNDS=1 PAIRED_WINDOWS="tune onepair200" SCRIPTS="logging_in_step main_guard" bash bench/paired_vs_continuous.sh OUT
set -euo pipefail
out=${1:?usage: paired_vs_continuous.sh OUT}
mkdir -p "$out"
export CG_STEPS=${CG_STEPS:-3000}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for name in ${SCRIPTS:-gan_two_optimizers rnn_hidden_state cifar_tutorial}; do
    work=$(mktemp -d)
    cp tests/corpus/"$name".py "$work/$name.py"
    cp tests/patch_golden/"$name".full_iteration.out.py "$work/${name}_graphed.py"
    for mode in continuous ${PAIRED_WINDOWS:-paired10 tune}; do
      # pairedN: windows of N steps, graphed and eager by turns, throughout; pairedNnogc: the
      # same with Python's garbage collector off (a wrapper runs the rewrite); tune: as tune
      # times a long script (windows of 10 up to its minimum, then each graphed window 50 ms);
      # onepairN: as tune times a script of N steps (tuner.tune.paired_settings: one pair of
      # long windows, graphed first, where N is too few for the long windows)
      paired=true; window=10; lengthen=0; repeats=5; iterations=""; stretch=0; seconds=3.0; target=("$work/${name}_graphed.py")
      case $mode in
        continuous) paired=false ;;
        tune) lengthen=50 ;;
        onepair*) lengthen=50; seconds=0   # the timing ends at the pair, as in a script of N steps
          read -r iterations repeats stretch < <(python -c "from tuner.harness import Settings; from tuner.tune import paired_settings
s = paired_settings(Settings(), ${mode#onepair}); print(s.iterations, s.repeats, s.stretch_steps)")
          ;;
        *) window=${mode#paired}; window=${window%nogc} ;;
      esac
      [ "${mode%nogc}" != "$mode" ] && target=("$work/nogc.py" "$work/${name}_graphed.py")
      printf 'import gc, runpy, sys\ngc.disable()\nsys.argv = sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name="__main__")\n' > "$work/nogc.py"
      CG_TUNE_SETTINGS="{\"paired\": $paired, \"to_end\": false, \"min_seconds\": $seconds, \"iterations\": ${iterations:-$((window * 10))}, \"repeats\": $repeats, \"stretch_steps\": $stretch, \"paired_window_ms\": $lengthen}" \
        python -m tuner.harness "$out/$name.$mode.$round.json" "${target[@]}" > /dev/null 2>&1 || true
    done
    CG_TUNE_SETTINGS='{"to_end": false, "min_seconds": 3.0}' \
      python -m tuner.harness "$out/$name.eager.$round.json" "$work/$name.py" > /dev/null 2>&1 || true
    rm -rf "$work"
  done
done
python - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
names = sorted({os.path.basename(p).split(".")[0] for p in glob.glob(f"{out}/*.json")})
modes = sorted({os.path.basename(p).split(".")[1] for p in glob.glob(f"{out}/*.json")} - {"eager", "continuous"})
print("ms/iteration, the median of rounds (each round's in brackets); pairedN: windows of N steps by turns, "
      "its eager windows beside it")


def ms(name, mode, key="ms_per_iter"):
    found = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{name}.{mode}.*.json"))]
    values = [d.get(key) if key != "eager_window_ms" else statistics.median(d.get(key) or [0]) for d in found]
    return [v for v in values if v]


def show(values):
    return f"{statistics.median(values):.3f} [{' '.join(f'{v:.3f}' for v in values)}]" if values else "-"


for name in names:
    c = ms(name, "continuous")
    line = f"{name:22s} eager process {show(ms(name, 'eager'))}  continuous graphed {show(c)}"
    for mode in modes:
        p = ms(name, mode)
        ratio = f" ({statistics.median(p) / statistics.median(c):.2f}x continuous)" if p and c else ""
        line += f"  {mode} graphed {show(p)}{ratio}, eager windows {show(ms(name, mode, 'eager_window_ms'))}"
    print(line)
PY
