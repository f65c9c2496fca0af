"""How fully should the calibrated launch cost scale a graphed callable's host cost? (#12)

``advisor.predict._host_speed`` scales the graphed callables' (and compile's) own host cost,
fitted on the H100 dataset, by this host's calibrated eager launch cost over the fitting one's,
to the model's ``host_speed_exponent``. For each exponent this refits the model on the shipped
H100 dataset as ``cg-advise model fit`` does, then prints the leave-one-family-out validation
on both shipped datasets (``cg-advise model eval`` and ``model eval h200``), the committed
unseen loops (``bench/unseen_eval.py``: every tune process a measurement) and, per dataset,
the callables' host cost per call that its own host-bound fwd_bwd rows measured, against what
the H100 line predicts for them at each exponent.

    python bench/host_speed_exponent.py [--exponents 1 0.5 0] [--json]
"""

import argparse
import contextlib
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor import predict as pr  # noqa: E402
from unseen_eval import GRAPH_PAIR, NOW, NOW_H200, evaluate  # noqa: E402


@contextlib.contextmanager
def host_speed_exponent(exponent: float):
    """Fits made inside take ``exponent`` in place of HOST_SPEED_EXPONENT."""
    saved = pr.HOST_SPEED_EXPONENT
    pr.HOST_SPEED_EXPONENT = exponent
    try:
        yield
    finally:
        pr.HOST_SPEED_EXPONENT = saved


def refit(exponent: float) -> dict:
    """The shipped model's fit with ``exponent`` in place of HOST_SPEED_EXPONENT."""
    with host_speed_exponent(exponent):
        return pr.fit(pr.shipped_dataset("h100"))


def unseen(model: dict) -> dict:
    """{label: [hits, measurements]}: the graph scopes on each GPU's sets timed as tune times
    now, and every scope over every set."""
    sets = evaluate(model)
    out = {}
    for gpu, prefixes in (("H100", NOW), ("H200", NOW_H200)):
        for scope in GRAPH_PAIR:
            mine = [s for s in sets if s["scope"] == scope and s["rows"].startswith(prefixes)]
            out[f"{gpu} {scope}"] = [sum(s["hits"] for s in mine), sum(s["measurements"] for s in mine)]
    for scope in ("full_iteration", "fwd_bwd", "compile"):
        mine = [s for s in sets if s["scope"] == scope]
        out[f"all {scope}"] = [sum(s["hits"] for s in mine), sum(s["measurements"] for s in mine)]
    out["all inside the interval"] = [sum(s["inside_interval"] for s in sets), sum(s["with_interval"] for s in sets)]
    return out


def validation(model_exponent: float) -> dict:
    """{dataset: {scope: share within the target}} of the leave-one-family-out validation, the
    residuals chosen as ``model fit`` chooses them."""
    out = {}
    with host_speed_exponent(model_exponent):
        for name in ("h100", "h200"):
            rows = pr.shipped_dataset(name)
            cv = pr.cross_validate(rows, pr.residual_choice(rows))
            out[name] = {scope: round(cv[scope][pr.CLOSE_SHARE.get(scope, "within_20_percent")], 3)
                         for scope in ("fwd_bwd", "full_iteration", "compile")}
    return out


def callable_cost(model: dict, dataset: str) -> dict:
    """The median host cost a call that ``dataset``'s host-bound fwd_bwd rows measured beyond
    the host work they leave eager (ms), beside the model's line for the same rows."""
    bare = {**model, "callable_ms": 0.0, "callable_ms_per_op": 0.0, "callable_ms_per_param": None}
    measured, predicted = [], []
    for row in pr.shipped_dataset(dataset):
        ms, params = pr._value(row, "fwd_bwd_ms"), pr._value(row, "param_tensors")
        side = pr.physical(row, "fwd_bwd", bare)
        if ms > pr.HOST_BOUND * side["gpu_ms"] and params > 0:
            measured.append(ms - side["host_ms"])
            predicted.append(pr.callable_ms(row, model) * pr._host_speed(row, model))
    return {"rows": len(measured), "measured_ms": statistics.median(measured), "predicted_ms": statistics.median(predicted)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exponents", type=float, nargs="+", default=[1.0, 0.5, 0.0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = {}
    for exponent in args.exponents:
        model = refit(exponent)
        found[exponent] = {"unseen": unseen(model), "validation": validation(exponent),
                           "callable_cost": {d: callable_cost(model, d) for d in ("h100", "h200")}}
    if args.json:
        print(json.dumps(found, indent=1))
        return
    for exponent, entry in found.items():
        print(f"exponent {exponent:g}")
        print("  unseen loops: " + "; ".join(f"{k} {h} of {n}" for k, (h, n) in entry["unseen"].items()))
        print("  leave-one-family-out: " + "; ".join(
            f"{d} " + ", ".join(f"{s} {v:.0%}" for s, v in scopes.items()) for d, scopes in entry["validation"].items()))
        print("  callables' host cost a call, median: " + "; ".join(
            f"{d} measured {c['measured_ms']:.3f} ms, predicted {c['predicted_ms']:.3f} ({c['rows']} rows)"
            for d, c in entry["callable_cost"].items()))


if __name__ == "__main__":
    main()
