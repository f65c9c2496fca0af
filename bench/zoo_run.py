"""Runs one zoo workload: eager for tracing, or every scope timed untraced (one JSON line each).

    python bench/zoo_run.py WORKLOAD --steps 30                 # eager, for nsys
    python bench/zoo_run.py WORKLOAD --time [--scopes a,b,c]    # untraced timings
"""

import argparse
import json
import sys
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tuner.scopes import SCOPES, build_step, time_step  # noqa: E402
from zoo import ZOO, loss_for  # noqa: E402


def setup(workload, seed=0):
    torch.manual_seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    gen = torch.Generator(device="cuda").manual_seed(seed)
    model = workload.build().cuda()
    batches = [workload.batch("cuda", gen) for _ in range(4)]
    return model, loss_for(workload), batches


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", choices=sorted(ZOO))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--time", action="store_true")
    parser.add_argument("--scopes", default=",".join(s for s in SCOPES if s != "compile"))
    args = parser.parse_args()
    workload = ZOO[args.workload]
    if not args.time:
        model, loss_fn, batches = setup(workload)
        step = build_step("eager", model, loss_fn, workload.optimizer, batches)
        for i in range(args.steps):
            step(i)
        torch.cuda.synchronize()
        return
    for scope in args.scopes.split(","):
        model, loss_fn, batches = setup(workload)
        torch.cuda.reset_peak_memory_stats()
        row = {"workload": workload.name, "scope": scope}
        try:
            step = build_step(scope, model, loss_fn, workload.optimizer, batches)
            row["ms_per_iter"] = time_step(step)
            row["status"] = "ok"
        except Exception as error:  # a failed capture is a result
            row["ms_per_iter"] = None
            row["status"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
            traceback.print_exc(file=sys.stderr)
        row["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
        print(json.dumps(row), flush=True)
        del model
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
