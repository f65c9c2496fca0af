"""Run-to-run spread of the harness's timing: each script, eager and patched with a scope, run
N times in alternation, each in a fresh process. Prints ms/iteration per run and the spread
(max/min) per variant, and the speedup of each pair.

    python bench/repeatability.py --scope full_iteration --runs 4 tests/corpus/amp_scaler.py ...
"""
import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.harness import Settings, parse_cpus  # noqa: E402
from tuner.patch import make_patch  # noqa: E402
from tuner.runner import new_workdir, run_candidate  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scripts", nargs="+", type=Path)
    parser.add_argument("--scope", default="full_iteration")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--cpus", default="", help="Pin every run to these CPUs, e.g. 0-3.")
    parser.add_argument("--iterations", type=int, default=100, help="Timed steps per process.")
    args = parser.parse_args()
    settings = Settings(cpus=parse_cpus(args.cpus), iterations=args.iterations)
    results = {}
    for source in args.scripts:
        folder = Path(tempfile.mkdtemp(prefix="cg-repeat-"))
        script = folder / source.name
        shutil.copy(source, script)
        patched = folder / f"patched_{source.name}"
        patched.write_text(make_patch(script, args.scope).patched)
        runs = {"eager": [], args.scope: []}
        for _ in range(args.runs):
            for name, target in (("eager", script), (args.scope, patched)):
                measured, _ = run_candidate(script, [], name, settings, new_workdir(), 600, target=target)
                runs[name].append(measured.ms_per_iter)
        spread = {k: max(v) / min(v) for k, v in runs.items() if all(v)}
        speedups = [e / p for e, p in zip(runs["eager"], runs[args.scope]) if e and p]
        results[source.stem] = {"cpus": args.cpus or "any", "ms_per_iter": runs, "spread": spread, "speedups": speedups}
        print(source.stem, json.dumps(results[source.stem]), flush=True)


if __name__ == "__main__":
    main()
