"""The benefit model: from a traced eager run's metrics to each capture scope's untraced speedup.

Two parts, both fitted on measurements (``advisor/data/zoo_h200.csv``: 31 zoo workloads on
an H200, features from their traces, untraced ms/iteration of every scope):

1. Untraced eager time. Tracing adds a roughly constant cost per GPU operation (about 7 us
   on the H200), so ``eager ~ max(GPU busy, traced period - c * operations)``, c fitted as the
   median over launch-bound workloads. The physical bound of a graph is eager / GPU busy.
2. Per graph scope, the share of launch overhead it recovers, r = (eager - scope) /
   (eager - busy), by ridge regression on trace features; speedup = B / (B - r (B - 1)),
   which never exceeds the bound B. ``compile`` changes the kernels themselves (fusion can
   beat the bound), so its log speedup is regressed directly and not capped.

Intervals come from the residuals of leave-one-family-out cross-validation (10th and 90th
percentiles of log error). The model ships as JSON coefficients; ``fit`` rebuilds it from a
dataset CSV with scikit-learn, ``predict`` needs numpy only.
"""

from __future__ import annotations

import csv
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np

from .errors import CgAdviseError

MODEL_VERSION = "cg-advise.model/1"
GRAPH_SCOPES = ("submodule", "fwd_bwd", "full_iteration")
SCOPES = GRAPH_SCOPES + ("compile",)
FEATURE_NAMES = ("log_bound", "log_busy_ms", "log1p_kernels", "gpu_utilization", "log1p_launch_api_over_busy",
                 "kernel_share_under_10us", "adamw")
COMPILE_FEATURES = FEATURE_NAMES[:3]
RIDGE_ALPHA = {"submodule": 1.0, "fwd_bwd": 1.0, "full_iteration": 1.0, "compile": 10.0}
GO_THRESHOLD = 1.05          # a scope "helps" when it is at least this much faster
GO_DECISION = 1.06           # predicted speedup needed to say so: a margin for the model's error near
                             # the bar (with it, cross-validation calls every graph-scope no-go no-go)
LAUNCH_BOUND_UTILIZATION = 0.5
RECOVERED_RANGE = (-0.2, 1.0)
DATASET = "zoo_h200.csv"
SHIPPED = "model_h200.json"


class ModelError(CgAdviseError):
    pass


# -- data -------------------------------------------------------------------------------
def read_dataset(path) -> list:
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as error:
        raise ModelError(f"{path}: {error.strerror}") from None
    needed = {"workload", "family", "gpu_busy_ms_per_iteration", "gpu_period_ms", "gpu_ops_per_iteration", "eager_ms"}
    if not rows or not needed <= set(rows[0]):
        raise ModelError(f"{path}: not a cg-advise dataset (needs columns {', '.join(sorted(needed))})")
    return rows


def shipped_dataset() -> list:
    with resources.as_file(resources.files("advisor") / "data" / DATASET) as path:
        return read_dataset(path)


def _number(row, key):
    value = row.get(key)
    return float(value) if value not in (None, "") else math.nan


def eager_estimate(summary: dict, per_op_ms: float) -> float:
    """Untraced eager ms/iteration from the traced run: tracing's per-operation cost removed."""
    busy = summary["gpu_busy_ms_per_iteration"]
    return max(busy, summary["gpu_period_ms"] - per_op_ms * summary["gpu_ops_per_iteration"])


def features(summary: dict, per_op_ms: float, optimizer: str = "") -> list:
    busy = max(summary["gpu_busy_ms_per_iteration"], 1e-6)
    bound = eager_estimate(summary, per_op_ms) / busy
    return [math.log(bound), math.log(busy), math.log1p(summary["kernels_per_iteration"]), summary["gpu_utilization"],
            math.log1p(summary["launch_api_ms_per_iteration"] / busy), summary["kernel_share_under_10us"],
            1.0 if optimizer == "adamw" else 0.0]


FEATURE_KEYS = ("gpu_busy_ms_per_iteration", "gpu_period_ms", "gpu_ops_per_iteration", "kernels_per_iteration",
                "gpu_utilization", "launch_api_ms_per_iteration", "kernel_share_under_10us")


def _summaries(rows):
    return [{k: _number(r, k) for k in FEATURE_KEYS} for r in rows]


# -- fitting ----------------------------------------------------------------------------
def fit_per_op_cost(rows) -> float:
    s = _summaries(rows)
    eager = np.array([_number(r, "eager_ms") for r in rows])
    period = np.array([x["gpu_period_ms"] for x in s])
    ops = np.array([x["gpu_ops_per_iteration"] for x in s])
    util = np.array([x["gpu_utilization"] for x in s])
    launch_bound = (util < LAUNCH_BOUND_UTILIZATION) & (ops > 0) & np.isfinite(eager)
    if not launch_bound.any():
        return 0.0
    return float(np.median((period - eager)[launch_bound] / ops[launch_bound]))


def _targets(rows, scope):
    eager = np.array([_number(r, "eager_ms") for r in rows])
    busy = np.array([_number(r, "gpu_busy_ms_per_iteration") for r in rows])
    ms = np.array([_number(r, f"{scope}_ms") for r in rows])
    if scope == "compile":
        return np.log(eager / ms)
    recovered = (eager - ms) / np.maximum(eager - busy, 1e-9)
    return np.clip(recovered, *RECOVERED_RANGE)


def _model_packages():
    """scikit-learn and scipy fit and evaluate the model; predicting needs numpy alone, so they
    are the optional extra ``cg-advise[model]`` and an analysis-only install goes without."""
    try:
        import scipy.stats  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as error:
        raise ModelError(f"fitting or evaluating the model needs scikit-learn and scipy ({error.name} is missing): "
                         "pip install 'cg-advise[model]'") from None


def _ridge(X, y, alpha):
    _model_packages()
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), Ridge(alpha=alpha)).fit(X, y)


def _linear(pipeline) -> dict:
    """The pipeline as one linear function of the raw features (for JSON)."""
    scaler, ridge = pipeline.named_steps["standardscaler"], pipeline.named_steps["ridge"]
    coef = ridge.coef_ / scaler.scale_
    return {"coef": [float(c) for c in coef], "intercept": float(ridge.intercept_ - np.dot(coef, scaler.mean_))}


def _design(rows, per_op_ms, names):
    idx = [FEATURE_NAMES.index(n) for n in names]
    full = np.array([features(s, per_op_ms, r.get("optimizer", "")) for s, r in zip(_summaries(rows), rows)])
    return full[:, idx]


def replay_cost_per_op(rows) -> float:
    """What a full-iteration graph still costs per GPU operation over the busy time (node
    launch latency inside the graph, input copies): median of (graphed - busy) / operations."""
    busy = np.array([_number(r, "gpu_busy_ms_per_iteration") for r in rows])
    ops = np.array([_number(r, "gpu_ops_per_iteration") for r in rows])
    graphed = np.array([_number(r, "full_iteration_ms") for r in rows])
    ok = np.isfinite(graphed) & (ops > 0)
    return float(np.median((graphed - busy)[ok] / ops[ok]))


def fit_scope(rows, scope: str, per_op: float) -> dict | None:
    """One scope's parameters: a physical replay cost for full_iteration, ridge regressions
    for the rest (share of overhead recovered; log speedup for compile)."""
    y = _targets(rows, scope)
    ok = np.isfinite(y)
    if ok.sum() < 4:
        return None
    if scope == "full_iteration":
        return {"kind": "replay_cost", "replay_ms_per_op": replay_cost_per_op([r for r, k in zip(rows, ok) if k]),
                "samples": int(ok.sum())}
    names = COMPILE_FEATURES if scope == "compile" else FEATURE_NAMES
    pipeline = _ridge(_design(rows, per_op, names)[ok], y[ok], RIDGE_ALPHA[scope])
    kind = "log_speedup" if scope == "compile" else "recovered"
    return {"kind": kind, "features": list(names), **_linear(pipeline), "alpha": RIDGE_ALPHA[scope],
            "samples": int(ok.sum())}


def fit(rows, provenance: str = "") -> dict:
    """A model (JSON-ready dict) from dataset rows; intervals from grouped cross-validation."""
    per_op = fit_per_op_cost(rows)
    model = {"version": MODEL_VERSION, "per_op_ms": per_op, "features": list(FEATURE_NAMES),
             "go_threshold": GO_THRESHOLD, "go_decision": GO_DECISION, "trained_on": len(rows),
             "provenance": provenance, "scopes": {}}
    cv = cross_validate(rows)
    for scope in SCOPES:
        params = fit_scope(rows, scope, per_op)
        if params is None:
            continue
        residual = cv[scope]["log_residuals"]
        params["log_interval"] = [float(np.percentile(residual, 10)), float(np.percentile(residual, 90))]
        model["scopes"][scope] = params
    return model


# -- prediction -------------------------------------------------------------------------
def predict(model: dict, summary: dict, optimizer: str = "") -> dict:
    """Per scope: speedup with an interval; graph scopes never above the bound."""
    busy = summary["gpu_busy_ms_per_iteration"]
    if not busy or busy <= 0:
        raise ModelError("no GPU busy time in this run: nothing to predict")
    eager = eager_estimate(summary, model["per_op_ms"])
    bound = eager / busy
    x = dict(zip(FEATURE_NAMES, features(summary, model["per_op_ms"], optimizer)))
    out = {"eager_ms_estimate": eager, "bound": bound}
    for scope, params in model["scopes"].items():
        speedup = _speedup(params, x, summary, eager, bound)
        low, high = (speedup * math.exp(q) for q in params.get("log_interval", (0.0, 0.0)))
        if scope != "compile":
            speedup, high = min(speedup, bound), min(high, bound)
        out[scope] = {"speedup": speedup, "low": min(low, speedup), "high": max(high, speedup),
                      "ms": eager / speedup}
    # the verdict rests on the graph scopes; compile (fusion, fewer measurements) is a reference
    best = max((s for s in GRAPH_SCOPES if s in out), key=lambda s: out[s]["speedup"], default=None)
    decision = model.get("go_decision", GO_DECISION)
    out["best"] = best
    out["graphs_help"] = bool(best and out[best]["speedup"] >= decision)
    out["advice"] = (f"best scope {best}: {out[best]['speedup']:.2f}x predicted" if out["graphs_help"]
                     else f"graphs will not help (best predicted speedup under {decision:.2f}x)")
    if "compile" in out and best and out["compile"]["speedup"] > max(out[best]["speedup"], decision):
        out["advice"] += (f"; torch.compile predicted {out['compile']['speedup']:.2f}x "
                          "(kernel fusion, lower confidence)")
    return out


def _speedup(params: dict, x: dict, summary: dict, eager: float, bound: float) -> float:
    kind = params["kind"]
    if kind == "replay_cost":
        busy = summary["gpu_busy_ms_per_iteration"]
        return eager / (busy + max(params["replay_ms_per_op"], 0.0) * summary["gpu_ops_per_iteration"])
    value = params["intercept"] + sum(c * x[n] for c, n in zip(params["coef"], params["features"]))
    if kind == "log_speedup":
        return math.exp(value)
    recovered = min(max(value, RECOVERED_RANGE[0]), RECOVERED_RANGE[1])
    return bound / (bound - recovered * (bound - 1))


def predictions_for(analysis, model: dict) -> dict:
    """Predictions for an analysis's reported process; none for a run already in graphs
    (the model reads eager traces)."""
    summary = analysis.main.summary
    if summary.verdict == "graphed":
        return {"note": "this run already executes in CUDA graphs: profile the eager loop to predict"}
    predicted = predict(model, {k: getattr(summary, k) for k in FEATURE_KEYS})
    return for_inference(predicted, model) if is_inference(summary.iteration_source) else predicted


def is_inference(iteration_source: str) -> bool:
    """Iterations found from the injected per-call ranges: an inference loop (no optimizer step)."""
    from .ranges import FORWARD

    return repr(FORWARD) in iteration_source


def for_inference(predicted: dict, model: dict) -> dict:
    """An inference loop's scopes are the ones tune and patch offer for it: ``forward`` (its
    whole iteration in a graph, so full_iteration's prediction) and ``compile``."""
    out = {k: v for k, v in predicted.items() if k not in SCOPES and k not in ("best", "graphs_help", "advice")}
    out["forward"] = predicted["full_iteration"]
    if "compile" in predicted:
        out["compile"] = predicted["compile"]
    decision = model.get("go_decision", GO_DECISION)
    out["best"] = "forward"
    out["graphs_help"] = out["forward"]["speedup"] >= decision
    out["advice"] = (f"best scope forward: {out['forward']['speedup']:.2f}x predicted" if out["graphs_help"]
                     else f"graphs will not help (best predicted speedup under {decision:.2f}x)")
    return out


def load_model(path=None) -> dict:
    try:
        if path is None:
            text = (resources.files("advisor") / "data" / SHIPPED).read_text()
        else:
            text = Path(path).read_text()
        model = json.loads(text)
    except OSError as error:
        raise ModelError(f"{path}: {error.strerror}") from None
    except ValueError:
        raise ModelError(f"{path}: not a JSON model") from None
    if model.get("version") != MODEL_VERSION:
        raise ModelError(f"{path or SHIPPED}: not a {MODEL_VERSION} model")
    return model


# -- evaluation -------------------------------------------------------------------------
def cross_validate(rows) -> dict:
    """Leave-one-family-out: each family is predicted by a model that never saw it."""
    _model_packages()
    from scipy.stats import spearmanr

    families = np.array([r["family"] for r in rows])
    eager = np.array([_number(r, "eager_ms") for r in rows])
    summaries = _summaries(rows)
    results = {}
    for scope in SCOPES:
        measured = eager / np.array([_number(r, f"{scope}_ms") for r in rows])
        ok = np.isfinite(measured)
        predicted = np.full(len(rows), np.nan)
        for family in np.unique(families[ok]):
            train = [r for r, keep in zip(rows, ok & (families != family)) if keep]
            if len(train) < 4:
                continue
            per_op = fit_per_op_cost(train)
            model = {"per_op_ms": per_op, "scopes": {scope: fit_scope(train, scope, per_op)}}
            for i in np.flatnonzero(ok & (families == family)):
                predicted[i] = predict(model, summaries[i], rows[i].get("optimizer", ""))[scope]["speedup"]
        done = ok & np.isfinite(predicted)
        residual = np.log(measured[done]) - np.log(predicted[done])
        nogo = measured[done] < GO_THRESHOLD
        results[scope] = {
            "workloads": int(done.sum()),
            "median_abs_log_error": float(np.median(np.abs(residual))) if done.any() else math.nan,
            "within_20_percent": float(np.mean(np.abs(predicted[done] / measured[done] - 1) <= 0.2)) if done.any() else math.nan,
            "spearman": float(spearmanr(predicted[done], measured[done])[0]) if done.sum() > 2 else math.nan,
            "go_nogo_accuracy": float(np.mean((predicted[done] >= GO_DECISION) == ~nogo)) if done.any() else math.nan,
            "nogo_workloads": int(nogo.sum()),
            "nogo_called_nogo": int(np.sum(predicted[done][nogo] < GO_DECISION)),
            "log_residuals": residual.tolist(),
            "predicted": {rows[i]["workload"]: float(predicted[i]) for i in np.flatnonzero(done)},
        }
    results["verdict"] = _verdict_accuracy(rows, results)
    return results


def _verdict_accuracy(rows, results) -> dict:
    """The tool's own call, per workload: do graphs help (best graph scope >= 1.05 measured)
    and did the model say so (best predicted graph scope >= the decision threshold)?"""
    measured_go, called_go = [], []
    for row in rows:
        eager = _number(row, "eager_ms")
        speedups = [eager / _number(row, f"{s}_ms") for s in GRAPH_SCOPES]
        predicted = [results[s]["predicted"].get(row["workload"], math.nan) for s in GRAPH_SCOPES]
        measured_go.append(np.nanmax(speedups) >= GO_THRESHOLD)
        called_go.append(np.nanmax(predicted) >= GO_DECISION)
    measured_go, called_go = np.array(measured_go), np.array(called_go)
    return {"workloads": len(rows), "accuracy": float(np.mean(measured_go == called_go)),
            "nogo_workloads": int((~measured_go).sum()), "nogo_called_nogo": int((~measured_go & ~called_go).sum()),
            "go_workloads": int(measured_go.sum()), "go_called_go": int((measured_go & called_go).sum())}
