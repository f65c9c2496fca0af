"""GPU evidence that every rewrite runs to the end of its script and prints what eager
prints: each corpus script, original and patched for each scope `patch` accepts, is run
whole in its own process (`python script.py`, no harness, nothing cut short), and then the
parameters of the largest module it built are summed, so a script that prints nothing is
compared too. Every run is seeded (torch, random, numpy) as tune's harness seeds it; a
full_iteration rewrite is compared with eager run with capturable optimizers, the same
implementation the rewrite uses. Printed numbers are compared with a relative tolerance (a capturable Adam and compile's
fused kernels round differently from eager); text must be equal.

    python bench/gpu_patched_to_the_end.py --out OUT [--only NAME,...] [--scopes S,...] [--jobs 4] [--tolerance 1e-3]
        [--eager-twice] [--fixed-draws] [--corpus DIR]

--corpus takes the scripts from DIR instead of tests/corpus (the loops of
bench/workloads/unseen_2026-11-29, written after the rewrites).

--fixed-draws takes the random draws out of both runs (dropout scales by 1-p, randn_like and
rand_like give zeros and halves): a graph draws other masks and noise than eager does, so a
script with dropout differs from its rewrite without it; with it, a difference is the rewrite's.

--eager-twice runs each eager reference a second time: a script whose eager run does not
repeat itself (atomics in a backward, a chaotic loss) differs from its rewrite by as much, and
the line says so beside the rewrite's difference.

Writes OUT/patched_to_the_end.json; prints one line per run and the counts. Correctness
only: runs share the GPU (``--jobs``), so wall times are not comparable speeds.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.errors import CgAdviseError  # noqa: E402
from tuner.patch import PATCH_SCOPES, make_patch  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# runs the script as __main__, then prints a checksum of every module's parameters it left
RUN = """
import gc, os, random, runpy, sys
import torch
random.seed(0)
torch.manual_seed(0)
try:
    import numpy
    numpy.random.seed(0)
except ImportError:
    pass
built = []                       # every module the script builds, kept alive to the end
_init = torch.nn.Module.__init__
def _keep(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    built.append(self)
torch.nn.Module.__init__ = _keep
if os.environ.get("CG_CHECK_FIXED_DRAWS") == "1":   # --fixed-draws: no random draw differs between the runs
    import torch.nn.functional as _F
    _F.dropout = lambda input, p=0.5, training=True, inplace=False: input * (1.0 - p) if training else input
    torch.randn_like = lambda t, **kw: torch.zeros_like(t, **kw)
    torch.rand_like = lambda t, **kw: torch.full_like(t, 0.5, **kw)
if os.environ.get("CG_CHECK_CAPTURABLE") == "1":   # eager with the optimizer a full_iteration patch uses
    sys.path.append(os.environ["CG_CHECK_ROOT"])
    from tuner.harness import build_capturable   # as tune's capturable reference builds them
    if torch.cuda.is_available():
        build_capturable(torch)
sys.argv = [sys.argv[1]] + sys.argv[2:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as e:
    if e.code not in (None, 0):
        raise
sums = sorted((sum(p.numel() for p in m.parameters()), float(sum(p.detach().double().sum() for p in m.parameters())))
              for m in built if any(True for _ in m.parameters()))
if sums:
    print("cg-check: largest module parameter sum", sums[-1][1])
"""


def run(script: Path, timeout: float, capturable: bool = False, fixed_draws: bool = False) -> dict:
    started = time.monotonic()
    env = {**os.environ, "CG_CHECK_CAPTURABLE": "1" if capturable else "0", "CG_CHECK_ROOT": str(ROOT),
           "CG_CHECK_FIXED_DRAWS": "1" if fixed_draws else "0"}
    try:
        p = subprocess.run([sys.executable, "-c", RUN, str(script)], capture_output=True, text=True, timeout=timeout,
                           cwd=script.parent, env=env)
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        code, out, err = None, "", f"timed out after {timeout:.0f} s"
    return {"returncode": code, "stdout": out, "stderr_tail": err.strip().splitlines()[-3:],
            "wall_s": round(time.monotonic() - started, 2)}


def same_output(eager: str, patched: str, tolerance: float):
    """(equal, largest relative difference of the numbers) line by line."""
    a, b = eager.strip().splitlines(), patched.strip().splitlines()
    if len(a) != len(b):
        return False, None
    worst = 0.0
    for x, y in zip(a, b):
        if NUMBER.sub("#", x) != NUMBER.sub("#", y):
            return False, None
        for u, v in zip(NUMBER.findall(x), NUMBER.findall(y)):
            u, v = float(u), float(v)
            worst = max(worst, abs(u - v) / max(abs(u), abs(v), 1e-12))
    return worst <= tolerance, worst


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="")
    parser.add_argument("--scopes", default=",".join(PATCH_SCOPES), help="the scopes to rewrite (default: all)")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--eager-twice", action="store_true", help="run each eager reference twice: its own spread")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the folder of scripts (default: tests/corpus)")
    parser.add_argument("--fixed-draws", action="store_true",
                        help="dropout scales by 1-p and randn_like/rand_like return zeros/halves, in eager and "
                             "rewrite alike: a difference left is the rewrite's, not a graph's other random draws")
    args = parser.parse_args()
    scopes = [scope for scope in PATCH_SCOPES if scope in args.scopes.split(",")]
    unknown = set(args.scopes.split(",")) - set(PATCH_SCOPES)
    if unknown:
        parser.error(f"--scopes: no such scope {', '.join(sorted(unknown))} (scopes: {', '.join(PATCH_SCOPES)})")
    out = Path(args.out)
    work = out / "scripts"
    work.mkdir(parents=True, exist_ok=True)
    only = set(filter(None, args.only.split(",")))
    jobs, refused = [], {}
    for source in sorted(args.corpus.glob("*.py")):
        if only and source.stem not in only:
            continue
        original = work / source.name
        original.write_bytes(source.read_bytes())
        for again in ("", "#2") if args.eager_twice else ("",):
            jobs.append((source.stem, "eager" + again, original, "eager"))
            jobs.append((source.stem, "eager_capturable" + again, original, "eager"))
        for scope in scopes:
            try:
                patch = make_patch(source, scope)
            except CgAdviseError as error:
                refused[f"{source.stem}.{scope}"] = str(error)
                continue
            target = work / f"{source.stem}__{scope}.py"
            target.write_bytes(patch.patched_bytes)
            # a full_iteration graph that holds the optimizer step makes an Adam-family optimizer
            # capturable: other kernels, other rounding, so its reference is eager with
            # capturable=True (a graph reproduces that one bit for bit); one that leaves the step
            # eager leaves the optimizer as the script built it, and plain eager is its reference
            jobs.append((source.stem, scope, target, "eager_capturable" if patch.steps_optimizer_in_graph else "eager"))
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(lambda job: (job, run(job[2], args.timeout, job[1].startswith("eager_capturable"),
                                                      args.fixed_draws)), jobs))
    references = {(name, scope): r for (name, scope, _, _), r in results if scope.startswith("eager")}
    eager = {name: r for (name, scope), r in references.items() if scope == "eager"}
    again_differs = {name for (name, scope), r in references.items() if scope.endswith("#2")
                     and not same_output(references[(name, scope[:-2])]["stdout"], r["stdout"], args.tolerance)[0]}
    rows = []
    for (name, scope, _, reference), r in results:
        if scope.startswith("eager"):
            continue
        e = references[(name, reference)]
        ok_run = r["returncode"] == 0
        equal, worst = same_output(e["stdout"], r["stdout"], args.tolerance) if ok_run else (False, None)
        again = references.get((name, reference + "#2"))
        own = same_output(e["stdout"], again["stdout"], args.tolerance)[1] if again else None
        row = {"script": name, "scope": scope, "ran_to_end": ok_run, "eager_ran": e["returncode"] == 0,
               "reference": reference, "same_output": equal, "max_relative_difference": worst,
               "eager_against_itself": own, "eager": e, "patched": r}
        rows.append(row)
        print(f"{name:24} {scope:15} {'ran' if ok_run else 'FAILED':6} "
              f"{'same' if equal else 'DIFFERENT'} (max rel diff {worst}"
              + (f"; eager against itself {own}" if again else "") + ")"
              + ("" if ok_run else f"  {r['stderr_tail'][-1:]}"), flush=True)
    counts = {"rewrites": len(rows), "ran_to_end": sum(r["ran_to_end"] for r in rows),
              "same_output": sum(r["same_output"] for r in rows), "refused": len(refused),
              "eager_failed": sorted(n for n, e in eager.items() if e["returncode"] != 0)}
    if args.eager_twice:   # scripts whose eager run differs from itself: a rewrite's difference is no finding there
        counts["eager_differs_from_itself"] = sorted(again_differs)
    print(json.dumps(counts))
    (out / "patched_to_the_end.json").write_text(json.dumps({"counts": counts, "rows": rows, "refused": refused},
                                                            indent=1))


if __name__ == "__main__":
    main()
