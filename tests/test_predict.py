"""The benefit model: shipped JSON against a scikit-learn refit, bounds, CV targets, CLI."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from advisor import predict as pr
from advisor.analysis import analyse
from advisor.cli import cli
from advisor.trace import open_trace
from conftest import ROOT, sample

DATASET = ROOT / "advisor" / "data" / "zoo_h200.csv"


@pytest.fixture(scope="module")
def rows():
    return pr.read_dataset(DATASET)


@pytest.fixture(scope="module")
def shipped():
    return pr.load_model()


def test_shipped_model_reproduces_a_scikit_learn_refit(rows, shipped):
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    per_op = pr.fit_per_op_cost(rows)
    assert shipped["per_op_ms"] == pytest.approx(per_op, rel=1e-12)
    summaries = pr._summaries(rows)
    for scope, params in shipped["scopes"].items():
        if params["kind"] == "replay_cost":
            # median over workloads of (graphed ms - GPU busy ms) / GPU operations, from the CSV alone
            replay = [(float(r["full_iteration_ms"]) - float(r["gpu_busy_ms_per_iteration"]))
                      / float(r["gpu_ops_per_iteration"]) for r in rows if r["full_iteration_ms"]]
            assert params["replay_ms_per_op"] == pytest.approx(float(np.median(replay)), rel=1e-12)
            continue
        y = pr._targets(rows, scope)
        ok = np.isfinite(y)
        X = pr._design(rows, per_op, params["features"])[ok]
        reference = make_pipeline(StandardScaler(), Ridge(alpha=params["alpha"])).fit(X, y[ok])
        ours = params["intercept"] + X @ np.array(params["coef"])
        np.testing.assert_allclose(ours, reference.predict(X), rtol=1e-9, atol=1e-12)
        assert params["samples"] == ok.sum()
    s0 = pr.predict(shipped, summaries[0], rows[0]["optimizer"])
    assert set(pr.SCOPES) <= set(s0)
    full = s0["full_iteration"]
    expected = s0["eager_ms_estimate"] / (summaries[0]["gpu_busy_ms_per_iteration"]
                                          + shipped["scopes"]["full_iteration"]["replay_ms_per_op"]
                                          * summaries[0]["gpu_ops_per_iteration"])
    assert full["speedup"] == pytest.approx(min(expected, s0["bound"]))


def test_graph_scopes_never_exceed_the_bound(rows, shipped):
    for summary, row in zip(pr._summaries(rows), rows):
        p = pr.predict(shipped, summary, row["optimizer"])
        assert p["bound"] >= 1
        for scope in pr.GRAPH_SCOPES:
            assert p[scope]["low"] <= p[scope]["speedup"] <= p[scope]["high"] <= p["bound"] + 1e-12


def test_bound_is_untraced_eager_over_busy(shipped):
    s = analyse(open_trace(sample("launch_eager"))).main.summary
    p = pr.predict(shipped, {k: getattr(s, k) for k in pr.FEATURE_KEYS})
    expected_eager = max(s.gpu_busy_ms_per_iteration, s.gpu_period_ms - shipped["per_op_ms"] * s.gpu_ops_per_iteration)
    assert p["eager_ms_estimate"] == pytest.approx(expected_eager)
    assert p["bound"] == pytest.approx(expected_eager / s.gpu_busy_ms_per_iteration)


def test_cross_validation_meets_the_targets(rows):
    """Grouped by family: median error within 20 %, every graph-scope no-go called no-go."""
    results = pr.cross_validate(rows)
    for scope in pr.GRAPH_SCOPES:
        r = results[scope]
        assert r["workloads"] == len(rows)
        assert r["median_abs_log_error"] <= math.log(1.2), scope
        assert r["nogo_called_nogo"] == r["nogo_workloads"], scope
        assert r["spearman"] > 0.8, scope
    verdict = results["verdict"]
    assert verdict["nogo_called_nogo"] == verdict["nogo_workloads"] > 0


def run(*args):
    result = CliRunner().invoke(cli, list(map(str, args)))
    return result.exit_code, result.stdout, result.stderr


def test_analyze_json_has_predictions_per_scope():
    code, out, _ = run("analyze", sample("launch_eager"), "--json")
    p = json.loads(out)["predictions"]
    for scope in ("submodule", "fwd_bwd", "full_iteration", "compile"):
        assert p[scope]["low"] <= p[scope]["speedup"] <= p[scope]["high"]
    assert p["graphs_help"] is True and p["best"] == "full_iteration"


def test_gpu_bound_run_is_told_graphs_will_not_help():
    code, out, _ = run("analyze", sample("compute_eager"), "--json")
    p = json.loads(out)["predictions"]
    assert code == 0 and p["graphs_help"] is False
    assert p["advice"].startswith("graphs will not help (best predicted speedup under 1.06x)")
    assert max(p[s]["speedup"] for s in pr.GRAPH_SCOPES) < 1.06


def test_graphed_run_gets_no_prediction():
    _, out, _ = run("analyze", sample("launch_graphed"), "--json")
    assert json.loads(out)["predictions"] == {
        "note": "this run already executes in CUDA graphs: profile the eager loop to predict"}


def assert_same_model(fitted, shipped):
    """Same structure, and numbers equal to 1e-9 relative: a refit's coefficients move by
    about 1e-15 between numpy / scikit-learn / BLAS builds (ridge solves in floating point),
    far below anything a prediction could show; a real change of the fit moves them by > 1e-3."""
    if isinstance(shipped, dict):
        assert isinstance(fitted, dict) and fitted.keys() == shipped.keys()
        for key in shipped:
            assert_same_model(fitted[key], shipped[key])
    elif isinstance(shipped, list):
        assert isinstance(fitted, list) and len(fitted) == len(shipped)
        for a, b in zip(fitted, shipped):
            assert_same_model(a, b)
    elif isinstance(shipped, float):
        assert fitted == pytest.approx(shipped, rel=1e-9, abs=1e-12)
    else:
        assert fitted == shipped


def test_model_fit_writes_and_keeps_an_existing_file(tmp_path):
    target = tmp_path / "m.json"
    code, _, err = run("model", "fit", DATASET, "-o", target)
    assert code == 0 and err.startswith(f"cg-advise: wrote {target}: 31 workloads")
    fitted = json.loads(target.read_text())
    assert_same_model(fitted["scopes"], pr.load_model()["scopes"])
    code, _, err = run("model", "fit", DATASET, "-o", target)
    assert code == 2 and err == f"cg-advise: error: {target} exists: pass --force to replace it (kept as m.json.bak)\n"
    code, out, _ = run("analyze", sample("launch_eager"), "--json", "--model", target)
    assert json.loads(out)["predictions"]["best"] == "full_iteration"


def test_model_eval_and_bad_inputs(tmp_path):
    code, out, _ = run("model", "eval", "--json")
    assert code == 0 and json.loads(out)["full_iteration"]["workloads"] == 31
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    code, _, err = run("model", "eval", bad)
    assert code == 2 and err.startswith(f"cg-advise: error: {bad}: not a cg-advise dataset")
    code, _, err = run("analyze", sample("launch_eager"), "--model", bad)
    assert code == 2 and err == f"cg-advise: error: {bad}: not a JSON model\n"


def test_inference_trace_gets_the_scopes_of_an_inference_loop(shipped):
    """An inference loop (iterations from the injected per-call ranges) is offered what tune and
    patch offer it: `forward` (the whole call in a graph: the replay-cost formula) and compile."""
    code, out, _ = run("analyze", sample("infer_eager"), "--json")
    analysis = json.loads(out)
    p = analysis["predictions"]
    assert set(p) == {"eager_ms_estimate", "bound", "forward", "compile", "best", "graphs_help", "advice"}
    s = analysis["summary"]
    expected = p["eager_ms_estimate"] / (s["gpu_busy_ms_per_iteration"] + shipped["scopes"]["full_iteration"]
                                         ["replay_ms_per_op"] * s["gpu_ops_per_iteration"])
    assert p["forward"]["speedup"] == pytest.approx(min(expected, p["bound"]), rel=1e-9)
    assert p["best"] == "forward" and p["advice"].startswith("best scope forward:")


def test_model_fit_without_the_model_extra_says_how_to_get_it(monkeypatch, tmp_path):
    """scikit-learn and scipy are the [model] extra: without them, analyze still predicts and
    fit / eval say what to install, in one line."""
    import sys

    monkeypatch.setitem(sys.modules, "sklearn", None)   # an import of it now fails as if it were absent
    code, out, err = run("analyze", sample("launch_eager"), "--json")
    assert code == 1 and json.loads(out)["predictions"]["best"] == "full_iteration"
    for args in (("model", "eval"), ("model", "fit", DATASET, "-o", tmp_path / "m.json")):
        code, _, err = run(*args)
        assert (code, err) == (2, "cg-advise: error: fitting or evaluating the model needs scikit-learn and scipy "
                                  "(sklearn is missing): pip install 'cg-advise[model]'\n")
    assert not (tmp_path / "m.json").exists()
