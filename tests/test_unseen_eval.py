"""The shipped benefit model on the committed unseen-script measurements (bench/unseen_eval.py):
a refit that does worse on scripts it never saw fails here, not in a user's hands."""
import json

import pytest
from conftest import bench_module


@pytest.fixture(scope="module")
def unseen():
    return bench_module("unseen_eval")


def test_every_committed_set_is_read_whole(unseen):
    """Each set's measurements are every paired process of every script it has a tune result for:
    counted here from the tune result files themselves (the scope's row, ok, one paired speedup
    per process), so a renamed file or a changed result layout cannot shrink the evaluation."""
    from advisor import predict as pr

    model = pr.load_model()
    evaluated = {s["set"]: s for s in unseen.evaluate(model)}
    for label, rows, results, scope, _ in unseen.SETS:
        expected = 0
        for row in pr.read_dataset(unseen.RESULTS / rows):
            folder = unseen.RESULTS / results
            path = next((p for p in (folder / f"{row['workload']}.py.cg-advise.json",
                                     folder / f"{row['workload']}.tune.json") if p.exists()), None)
            if path is None:
                continue
            tuned = next((r for r in json.loads(path.read_text())["rows"]
                          if r["scope"] == scope and r["status"] == "ok" and r.get("paired_speedup")), None)
            if tuned is not None and "speedup" in pr.predict(model, row).get(scope, {}):
                expected += len(tuned.get("paired_runs") or [tuned["paired_speedup"]])
        assert evaluated[label]["measurements"] == expected > 0, label


def test_the_shipped_model_on_scripts_it_never_saw(unseen):
    """166 of the 214 paired measurements within the target and 180 inside the interval: the
    last 16, four loops profiled after every change of the session on two H100 starts, 13 and
    14. 153 of the 198 paired measurements within the target and 166 inside the interval once
    the loss's backward stayed eager under graphed callables (151 and 160 without: fwd_bwd 72
    and 71 of 84, compile 27 and 26 of 35; the sets whose traces were at hand re-read by the
    analyser of now); of the 18 profiled after compile's call cost, the four loops 9 of 12,
    two public example loops 3 of 3, KL annealing 2 of 2 (0 of 2 before the loss's share), the
    dynamic-padding loop's compile (2.51x for 1.84x) a miss; 138 of the first 180 (20 %, compile 25 %) and 145 inside the
    printed 80 % interval once compile paid its own host cost per call and kept to physics
    alone (compile 21 of 28 within 25 %, 18 before); 135 and 140 with the model of 2026-11-25: 116 and 121 of the 155 taken before the
    multi-model loops of 2026-11-26, whose 25 read 19 and 19 (fwd_bwd of a GAN and of two losses
    backed by hand predicted 1.46x and 1.67x for 0.99x-1.03x before the bootstrap marked every
    model; 1.08x and 1.06x after; compile over-predicted on them, 2 of 7); 93 and 100 of the 120
    taken before 2026-11-26; a refit with the ten optimizer-eager rows timed again, 103 and 113
    of the first 139, bench/results/retimed_optimizer_eager_h100). The interval must hold about
    what it says: neither much narrower than now (176 of 214 at least) nor vacuous (over 95 %)."""
    from advisor import predict as pr

    sets = unseen.evaluate(pr.load_model())
    hits, total = sum(s["hits"] for s in sets), sum(s["measurements"] for s in sets)
    inside, counted = sum(s["inside_interval"] for s in sets), sum(s["with_interval"] for s in sets)
    assert total == 214
    assert hits >= 164
    compile_hits = sum(s["hits"] for s in sets if s["scope"] == "compile")
    compile_total = sum(s["measurements"] for s in sets if s["scope"] == "compile")
    assert compile_hits >= 0.75 * compile_total   # the target for compile
    assert inside >= 176 and inside / counted <= 0.95
