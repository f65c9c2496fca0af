#!/bin/bash
# The model variant docs/prediction-evidence.md ("On a lone H200") tried and did not adopt: the
# profile bootstrap's own host time taken out of the prediction (bench/variants/bootstrap_cost.diff:
# its time between iterations, 4.45 eager launches fitted on the dataset's plain loops, off the
# host side; its hooks, VARIANT_HOOKS launches, off the measured baseline where the GPU waits;
# VARIANT_OWN_FB times the between-iteration time off fwd_bwd's eager phases too). Applies the
# diff to a copy of the committed tree, refits on the H100 dataset and prints
# bench/unseen_eval.py's figures for that model. CPU only, about a minute.
# Usage: VARIANT_HOOKS=17.5 VARIANT_OWN_FB=1 bash bench/variant_bootstrap_cost.sh
#        VARIANT_HOOKS=0 VARIANT_OWN_FB=0 bash bench/variant_bootstrap_cost.sh     (the between time alone)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
git -C "$root" archive HEAD | tar -x -C "$copy"
(cd "$copy" && git apply "$root/bench/variants/bootstrap_cost.diff")
cd "$copy"
python3 -c "import json; from advisor import predict as pr; json.dump(pr.fit(pr.shipped_dataset('h100'), 'variant'), open('variant_model.json', 'w'))"
python3 bench/unseen_eval.py --model variant_model.json
