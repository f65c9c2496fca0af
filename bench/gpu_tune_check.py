"""GPU evidence for `tune` and `patch` (run on the GPU machine after `source .devkit/nsys-env.sh`).

For each workload of bench/workloads/plain_train.py: profile it (predictions), tune it with
the profile, apply the winner to a copy, run the patched copy under the harness, and check
that it is as fast as tune said (within 5 %). Writes OUT/tune_check.json and prints a table.

    python bench/gpu_tune_check.py --out OUT [--only NAME] [--no-profile] [--device cuda]
"""
import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.harness import Settings  # noqa: E402
from tuner.runner import new_workdir, run_candidate  # noqa: E402

SCRIPT = ROOT / "bench" / "workloads" / "plain_train.py"
WORKLOADS = {
    "mlp_sgd": ["--model", "mlp"],
    "mlp_adamw": ["--model", "mlp", "--optimizer", "adamw"],
    "mlp_logging": ["--model", "mlp", "--log-every", "25"],
    "cnn_sgd": ["--model", "cnn", "--depth", "6", "--batch", "32"],
    "gpt_adamw": ["--model", "gpt", "--width", "128", "--depth", "4", "--batch", "8", "--optimizer", "adamw"],
    "wide_mlp": ["--model", "mlp", "--width", "4096", "--depth", "6", "--batch", "8192"],
}
CG = [sys.executable, "-m", "advisor.cli"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, workload_args in WORKLOADS.items():
        if args.only and name not in args.only.split(","):
            continue
        script = args.out / f"{name}.py"
        shutil.copy(SCRIPT, script)
        wargs = [*workload_args, "--steps", "200", "--device", args.device]
        row = {"workload": name, "args": wargs}
        trace = []
        if not args.no_profile:
            p = subprocess.run([*CG, "profile", "--force", "--output-dir", str(args.out), "-o", f"{name}_eager",
                                "--json", str(script), *wargs], capture_output=True, text=True)
            if p.stdout.strip().startswith("{"):
                analysis = json.loads(p.stdout)
                row["predictions"] = {s: analysis["predictions"].get(s, {}).get("speedup")
                                      for s in ("submodule", "fwd_bwd", "full_iteration", "compile")}
                row["gpu_busy_ms"] = analysis["summary"]["gpu_busy_ms_per_iteration"]
                trace = ["--trace", str(args.out / f"{name}_eager.sqlite")]
            else:
                row["profile_error"] = p.stderr.strip().splitlines()[-1:]
        t = subprocess.run([*CG, "tune", "--json", "--exhaustive", *trace, str(script), *wargs],
                           capture_output=True, text=True)
        if not t.stdout.strip().startswith("{"):
            row["tune_error"] = t.stderr.strip().splitlines()[-3:]
            results[name] = row
            continue
        tuned = json.loads(t.stdout)
        row["eager_ms"] = tuned["eager_ms"]
        row["winner"] = tuned["winner"]
        row["candidates"] = {r["scope"]: {k: r[k] for k in ("ms_per_iter", "speedup", "recovered", "status", "correct")}
                             | {"failure": (r.get("failure") or {}).get("kind")} for r in tuned["rows"]}
        usable = [r for r in tuned["rows"] if r["status"] == "ok" and r["correct"] is not False]
        fastest = min((r["ms_per_iter"] for r in usable), default=None)
        winner_ms = next((r["ms_per_iter"] for r in tuned["rows"] if r["scope"] == tuned["winner"]), tuned["eager_ms"])
        row["winner_within_3pct_of_fastest"] = fastest is None or winner_ms <= 1.03 * fastest
        row["winner_not_slower_than_eager"] = winner_ms <= tuned["eager_ms"]
        if tuned["winner"] != "eager":
            patched = args.out / f"{name}_patched.py"
            shutil.copy(script, patched)
            shutil.copy(Path(str(script) + ".cg-advise.json"), Path(str(patched) + ".cg-advise.json"))
            result = json.loads(Path(str(patched) + ".cg-advise.json").read_text())
            result["sha256"] = __import__("advisor.patching", fromlist=["file_digest"]).file_digest(patched)
            Path(str(patched) + ".cg-advise.json").write_text(json.dumps(result))
            a = subprocess.run([*CG, "patch", str(patched), "--apply"], capture_output=True, text=True)
            row["patch_apply"] = a.returncode
            # the patched script as the user would run it, measured by the harness
            scope = tuned["winner"]
            settings = Settings(scope="full_iteration" if scope == "full_iteration" else "eager")
            measured, _ = run_candidate(patched, wargs, "eager", settings, new_workdir(), 600)
            row["patched_ms"] = measured.ms_per_iter
            row["patched_status"] = measured.status
            if measured.ms_per_iter:
                row["patched_vs_tune"] = measured.ms_per_iter / winner_ms
        results[name] = row
        print(json.dumps(row), flush=True)
    (args.out / "tune_check.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
