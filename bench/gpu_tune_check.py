"""GPU evidence for `tune` and `patch` (run on the GPU machine after `source .devkit/nsys-env.sh`).

For each workload: optionally profile it (predictions and the GPU-busy bound), tune it, apply
the winner to a copy with `cg-advise patch --apply`, run the patched copy under the harness,
and check that it is as fast as tune said (within 5 %) and trains the same parameters as
tune's eager run. Workloads: `plain` (bench/workloads/plain_train.py
in five configurations), `corpus` (the scripts of tests/corpus), or both. Results are written
to OUT/tune_check.json after every workload.

    python bench/gpu_tune_check.py --out OUT [--set plain|corpus|all] [--only NAME,...]
        [--no-profile] [--scopes S,...] [--deadline SECONDS] [--device cuda] [--runs N] [--cpus 0-3]
        [--iterations N] [--no-patched-run]
"""
import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.patching import file_digest  # noqa: E402
from tuner.harness import Settings, parse_cpus, step_counting  # noqa: E402
from tuner.runner import max_relative_difference, new_workdir, run_repeated  # noqa: E402

PLAIN = ROOT / "bench" / "workloads" / "plain_train.py"
CORPUS = ROOT / "tests" / "corpus"
PLAIN_WORKLOADS = {
    "mlp_sgd": ["--model", "mlp"],
    "mlp_adamw": ["--model", "mlp", "--optimizer", "adamw"],
    "cnn_sgd": ["--model", "cnn", "--depth", "6", "--batch", "32"],
    "gpt_adamw": ["--model", "gpt", "--width", "128", "--depth", "4", "--batch", "8", "--optimizer", "adamw"],
    "wide_mlp": ["--model", "mlp", "--width", "4096", "--depth", "6", "--batch", "8192"],
}
CG = [sys.executable, "-m", "advisor.cli"]


def workloads(which: str, device: str) -> dict:
    """name -> (script, args)."""
    chosen = {}
    if which in ("plain", "all"):
        chosen.update({name: (PLAIN, [*args, "--steps", "200", "--device", device])
                       for name, args in PLAIN_WORKLOADS.items()})
    if which in ("corpus", "all"):
        chosen.update({path.stem: (path, []) for path in sorted(CORPUS.glob("*.py"))})
    return chosen


def profile(name, script, wargs, out):
    p = subprocess.run([*CG, "profile", "--force", "--output-dir", str(out), "-o", f"{name}_eager",
                        "--json", str(script), *wargs], capture_output=True, text=True)
    if not p.stdout.strip().startswith("{"):
        return {"profile_error": p.stderr.strip().splitlines()[-1:]}, []
    analysis = json.loads(p.stdout)
    return ({"predictions": {s: analysis["predictions"].get(s, {}).get("speedup")
                             for s in ("submodule", "fwd_bwd", "full_iteration", "compile")},
             "gpu_busy_ms": analysis["summary"]["gpu_busy_ms_per_iteration"]},
            ["--trace", str(out / f"{name}_eager.sqlite")])


def check_patched(script, wargs, tuned, winner_ms, out, name, runs=1, cpus=()) -> dict:
    """`patch --apply` on a copy (as the user would), then the copy under the harness, its time
    against tune's for the winner and its snapshot against tune's eager run."""
    patched = out / f"{name}_patched.py"
    shutil.copy(script, patched)
    result = {**tuned, "sha256": file_digest(patched)}
    Path(str(patched) + ".cg-advise.json").write_text(json.dumps(result))
    applied = subprocess.run([*CG, "patch", str(patched), "--apply"], capture_output=True, text=True)
    row = {"patch_apply": applied.returncode}
    if applied.returncode != 0:
        row["patch_error"] = applied.stderr.strip().splitlines()[-1:]
        return row
    settings = Settings(kind=tuned["step"]["kind"], **step_counting(tuned["step"]), cpus=list(cpus),
                        **tuned["timing"])   # as tune timed it
    measured, snapshot = run_repeated(patched, wargs, "patched", settings, new_workdir(), 600, runs, target=patched)
    eager_snapshot = Path(tuned["workdir"]) / "eager.params.pt"   # tune's own eager run
    row.update(patched_ms=measured.ms_per_iter, patched_run_ms=measured.run_ms, patched_status=measured.status,
               patched_failure=(measured.failure or {}).get("kind"))
    if measured.ms_per_iter:
        row["patched_vs_tune"] = measured.ms_per_iter / winner_ms
        row["patched_within_5pct_of_tune"] = abs(row["patched_vs_tune"] - 1) <= 0.05
    if snapshot and eager_snapshot.exists():
        row["patched_param_diff_vs_eager"] = max_relative_difference(eager_snapshot, snapshot)
        row["patched_matches_eager"] = row["patched_param_diff_vs_eager"] <= tuned["tolerance"]
    return row


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--set", dest="which", choices=["plain", "corpus", "all"], default="plain")
    parser.add_argument("--only", default="")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--scopes", default="", help="Scopes to try (default: all of each loop's kind).")
    parser.add_argument("--deadline", type=float, default=0, help="Start no workload after this many seconds.")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--runs", type=int, default=1, help="Processes per candidate (tune --runs), and per patched run.")
    parser.add_argument("--cpus", default="", help="tune --cpus, and the same pinning for the patched run.")
    parser.add_argument("--iterations", type=int, default=0, help="tune --iterations (timed steps per process).")
    parser.add_argument("--no-patched-run", action="store_true",
                        help="Tune only: do not apply and run the winner (a measurement of tune itself, repeated).")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = {}
    for name, (source, wargs) in workloads(args.which, args.device).items():
        if args.only and name not in args.only.split(","):
            continue
        if args.deadline and time.monotonic() - started > args.deadline:
            results[name] = {"workload": name, "skipped": "deadline"}
            continue
        script = args.out / f"{name}.py"
        shutil.copy(source, script)
        row, trace = {"workload": name, "args": wargs}, []
        if not args.no_profile:
            found, trace = profile(name, script, wargs, args.out)
            row.update(found)
        scopes = (["--scopes", args.scopes] if args.scopes else []) + ["--runs", str(args.runs)] + (
            ["--cpus", args.cpus] if args.cpus else []) + (
            ["--iterations", str(args.iterations)] if args.iterations else [])
        t = subprocess.run([*CG, "tune", "--json", "--keep-workdir", "--exhaustive", *scopes, *trace, str(script), *wargs],
                           capture_output=True, text=True)
        if not t.stdout.strip().startswith("{"):
            row["tune_error"] = t.stderr.strip().splitlines()[-3:]
        else:
            tuned = json.loads(t.stdout)
            row.update(eager_ms=tuned["eager_ms"], eager_run_ms=tuned.get("eager_run_ms"),
                       winner=tuned["winner"], candidates={
                r["scope"]: {k: r[k] for k in ("ms_per_iter", "run_ms", "speedup", "recovered", "status", "correct",
                                               "peak_mb")}
                | {"failure": (r.get("failure") or {}).get("kind"),
                   "failure_message": (r.get("failure") or {}).get("message", "")[-300:]} for r in tuned["rows"]})
            usable = [r for r in tuned["rows"] if r["status"] == "ok" and r["correct"] is not False]
            fastest = min((r["ms_per_iter"] for r in usable), default=None)
            winner_ms = next((r["ms_per_iter"] for r in tuned["rows"] if r["scope"] == tuned["winner"]),
                             tuned["eager_ms"])
            row["winner_within_3pct_of_fastest"] = fastest is None or winner_ms <= 1.03 * fastest
            row["winner_not_slower_than_eager"] = winner_ms <= tuned["eager_ms"]
            if tuned["winner"] != "eager" and not args.no_patched_run:
                row.update(check_patched(script, wargs, tuned, winner_ms, args.out, name, args.runs,
                                         parse_cpus(args.cpus)))
        row["seconds"] = round(time.monotonic() - started, 1)
        results[name] = row
        print(json.dumps(row), flush=True)
        (args.out / "tune_check.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
