#!/bin/bash
# A learning rate changed outside the captured loop (a scheduler stepped once an epoch): the
# full_iteration rewrite of tests/corpus/scheduler_per_epoch.py made with the helper of before
# (whose graph kept the first epoch's learning rate) and now (which captures again when the
# optimizer's settings changed), each run to its end beside plain eager; the printed lines
# (learning rate, mean loss, sum of |weights| per epoch) are compared.
#
#   bash bench/gpu_recapture_probe.sh OUT OLD_CHECKOUT
#
# OLD_CHECKOUT: advisor/ and tuner/ of the commit before (git archive HEAD~N advisor tuner |
# tar -x -C DIR). On a GPU.
set -u
OUT=${1:?OUT}; OLD=${2:?OLD_CHECKOUT}
script=tests/corpus/scheduler_per_epoch.py
mkdir -p "$OUT"
cp "$script" "$OUT/eager.py"
for version in old new; do
    path=$PWD; [ "$version" = old ] && path=$OLD
    python -c "import sys; sys.path.insert(0, '$path'); from tuner.patch import make_patch; \
        sys.stdout.write(make_patch('$script', 'full_iteration').patched)" > "$OUT/patched_$version.py"
done
for run in eager patched_old patched_new; do
    python "$OUT/$run.py" > "$OUT/$run.out" 2> "$OUT/$run.err"
    echo "== $run: rc $?"; cat "$OUT/$run.out"
done
for version in old new; do
    cmp -s "$OUT/eager.out" "$OUT/patched_$version.out" && same=same || same=differs
    echo "patched with the helper of $version: $same as eager"
done
