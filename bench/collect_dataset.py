"""Collects the benefit model's dataset on a GPU the way a user meets it: each workload is a
training script (bench/workloads/zoo_scripts: the zoo's models as a plain loop, fed by a
DataLoader in a function, or with AMP + GradScaler + scheduler) that is profiled with
`cg-advise profile` (default window: untraced baseline, calibration, scopes as applied) and
then tuned with `cg-advise tune` (each scope as patch applies it, timed against eager, with tune's
own defaults, the script run for about --tune-seconds of eager steps).

    source .devkit/nsys-env.sh
    python bench/collect_dataset.py --out OUT [--part 1/3] [--only NAME,...] [--scopes S,...]
        [--deadline SECONDS]

On a machine with several GPUs, one collector per GPU (CUDA_VISIBLE_DEVICES=K, --part K+1/N)
runs the slices side by side (bench/collect_parallel.sh).

Appends one JSON line per workload to OUT/rows.jsonl (the profile's analysis, its run record
and the tune result); traces go to OUT/traces. ``python bench/build_dataset.py`` turns the
rows and traces into the model's CSV. A run cut short keeps what it finished.
"""

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "bench" / "workloads" / "zoo_scripts"
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from zoo import HF_ZOO, ZOO  # noqa: E402

from advisor.runrecord import measured_eager_ms  # noqa: E402

CG = [sys.executable, "-m", "advisor.cli"]
PAIRED_FIGURES = ("measured_ms", "paired_eager_ms", "paired_speedup")
MIN_STEPS, MAX_STEPS = 200, 5000
# the script-shaped variants: a DataLoader (host work between steps), AMP with a scaler and a
# scheduler (the optimizer stays eager), the loss logged every step (a sync between steps), on
# models from launch-bound to compute-bound
SHAPED = {
    "loader": ["mlp_w256_d8_b64", "mlp_w1024_d8_b1024", "cnn_c32_k8_b64_s32", "gpt_d128_l2_b8_t64",
               "emb_v10000_d32_n8_b256"],
    "amp": ["mlp_w256_d16_b64", "cnn_c16_k4_b32_s32", "gpt_d256_l4_b8_t128", "gpt_d768_l6_b16_t512",
            "rnn_h256_t32_b64"],
    # the loss read on the host every step: a sync between steps, which a whole-step graph keeps
    # out (the model's share for it was unfitted: no row had one)
    "logged": ["mlp_w256_d8_b64", "mlp_w1024_d8_b1024", "cnn_c16_k4_b32_s32", "cnn_c64_k4_b128_s32",
               "gpt_d128_l2_b8_t64", "gpt_d256_l4_b8_t128", "rnn_h128_t16_b32", "emb_v10000_d32_n8_b256",
               "mlp_w128_d32_b32", "cnn_c32_k8_b64_s32"],
}


def workloads() -> list:
    """(name, shape, zoo workload) for every plain zoo workload, the shaped variants and the
    Hugging Face models (shape ``hf``: zoo_hf.py, the Trainer's way)."""
    rows = [(name, "plain", name) for name in ZOO]
    for shape, names in SHAPED.items():
        rows += [(f"{name}+{shape}", shape, name) for name in names]
    return rows + [(name, "hf", name) for name in HF_ZOO]


def family_and_optimizer(workload: str) -> tuple:
    if workload in HF_ZOO:
        return "hf", "adamw"
    return ZOO[workload].family, ZOO[workload].optimizer


def run_json(command, timeout):
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    start = out.stdout.find("{")
    if start < 0:
        return None, (out.stderr.strip().splitlines() or ["no output"])[-1]
    try:
        return json.loads(out.stdout[start:]), None
    except ValueError:
        return None, "no JSON on stdout"


def tune_steps(record, seconds: float) -> int:
    """Steps for tune's run of the script: about ``seconds`` of eager steps at the profile's
    untraced baseline, so that tune times it as it times a user's script of that length (over
    seconds, its graphed windows 50 ms long past the minimum), not in 10-step windows, which read
    a fast graph slow (bench/results/paired_windows_h100/). 200 where the profile has no baseline;
    at most 5000."""
    baseline = measured_eager_ms(record)
    if not seconds or not baseline:
        return MIN_STEPS
    return max(MIN_STEPS, min(MAX_STEPS, math.ceil(seconds * 1000 / baseline)))


def collect(name, shape, workload, out: Path, scopes: str, tune_seconds: float) -> dict:
    script = SCRIPTS / f"zoo_{shape}.py"
    family, optimizer = family_and_optimizer(workload)
    row = {"workload": name, "family": family, "shape": shape, "optimizer": optimizer}
    safe = name.replace("+", "_")
    started = time.monotonic()
    analysis, error = run_json([*CG, "profile", "--json", "--force", "--output-dir", str(out / "traces"), "-o", safe,
                                str(script), workload, "--steps", "200"], 300)
    row["profile_s"] = round(time.monotonic() - started, 1)
    row["profile_error"] = error
    if analysis:
        row["summary"] = analysis["summary"]
        row["predictions"] = analysis["predictions"]
    record = out / "traces" / f"{safe}.cg-advise-run.json"
    row["record"] = json.loads(record.read_text()) if record.exists() else None
    steps = tune_steps(row["record"], tune_seconds)
    row["tune_steps"] = steps
    started = time.monotonic()
    tuned, error = run_json([*CG, "tune", "--json", "--scopes", scopes, "--budget", "400",
                             str(script), workload, "--steps", str(steps)], 450)
    row["tune_s"] = round(time.monotonic() - started, 1)
    row["tune_error"] = error
    if tuned:
        row["eager_ms"] = tuned["eager_ms"]
        # the paired figures too (the graphed and eager windows of the candidate's process, their
        # ratio with graphing's slowdown taken out): ``ms`` is eager over that ratio, and only
        # these tell the eager process's host speed from the candidate's
        row["scopes"] = {r["scope"]: {"ms": r["ms_per_iter"], "status": r["status"], "correct": r["correct"],
                                      "failure": (r.get("failure") or {}).get("kind"),
                                      **{key: r.get(key) for key in PAIRED_FIGURES}} for r in tuned["rows"]}
    return row


def fail_fast() -> None:
    """Profile and tune need the whole package: a missing dependency (a kit without the pyflakes
    wheel, say) would otherwise fail every workload's tune after its profile, minutes of GPU
    time each."""
    probe = subprocess.run([sys.executable, "-c", "import advisor.cli, tuner.patch, tuner.harness"],
                           capture_output=True, text=True, cwd=ROOT)
    if probe.returncode:
        raise SystemExit(f"collect_dataset: cg-advise cannot be imported here: "
                         f"{(probe.stderr.strip().splitlines() or ['?'])[-1]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--part", default="1/1", help="K/N: the K-th of N slices of the workloads")
    parser.add_argument("--only", default="", help="comma-separated workload names")
    parser.add_argument("--scopes", default="full_iteration,fwd_bwd")
    parser.add_argument("--deadline", type=float, default=0, help="start no workload after this many seconds")
    parser.add_argument("--tune-seconds", type=float, default=5.0,
                        help="tune runs the script for about this long eager (0: 200 steps, as before 2026-11-28)")
    args = parser.parse_args()
    fail_fast()
    k, n = (int(v) for v in args.part.split("/"))
    chosen = workloads()
    if args.only:   # in the order given, then sliced: --only A,B,C --part 2/2 runs B
        order = {name: i for i, name in enumerate(args.only.split(","))}
        chosen = sorted((w for w in chosen if w[0] in order), key=lambda w: order[w[0]])
    chosen = chosen[k - 1::n]
    (args.out / "traces").mkdir(parents=True, exist_ok=True)
    begun = time.monotonic()
    for name, shape, workload in chosen:
        if args.deadline and time.monotonic() - begun > args.deadline:
            print(f"deadline: stopped before {name}", flush=True)
            break
        row = collect(name, shape, workload, args.out, args.scopes, args.tune_seconds)
        with open(args.out / "rows.jsonl", "a") as handle:
            handle.write(json.dumps(row) + "\n")
        measured = {s: (v["ms"] and row["eager_ms"] / v["ms"]) for s, v in row.get("scopes", {}).items()}
        print(f"{name}: profile {row['profile_s']} s, tune {row['tune_s']} s, eager {row.get('eager_ms')}, "
              f"baseline {(row.get('record') or {}).get('untraced')}, measured {measured} "
              f"{row['profile_error'] or ''} {row['tune_error'] or ''}", flush=True)


if __name__ == "__main__":
    main()
