"""Predictions from other people's exports (a plain `nsys profile` of a script: no bootstrap, no
NVTX range) against what tune measured in the same session on the lent H100: the committed
set of bench/results/plain_exports_h100 (bench/gpu_plain_exports.sh). A change to the step
finder or to the unmarked path that does worse on them fails here."""

import pytest
from conftest import ROOT, bench_module

FOLDER = ROOT / "bench" / "results" / "plain_exports_h100"
STEPS = 200   # each corpus script's default CG_STEPS


@pytest.fixture(scope="module")
def rows():
    return bench_module("plain_vs_measured").compare(FOLDER, ["full_iteration", "fwd_bwd"])


def test_every_plain_export_is_cut_at_its_steps(rows):
    """Five scripts, both scopes measured: every step but the first (set-up), the last and the
    one cut at the boundary, found in the kernels."""
    assert len({r["script"] for r in rows}) == 5 and all(r["measured"] for r in rows)
    for r in rows:
        assert r["plain_source"].startswith("a training step its kernels repeat (")
        assert STEPS - 3 <= r["plain_iterations"] <= STEPS - 1


def test_plain_exports_predict_about_as_well_as_a_profile(rows):
    """7 of 10 within 20 % from the plain exports (1 of 8 before the between-step host time,
    the optimizer's phase and the GradScaler were read off the kernels), 8 of 10 from
    `cg-advise profile` of the same scripts."""
    plain = [r["plain_within"] for r in rows]
    profiled = [r["profiled_within"] for r in rows]
    assert sum(plain) >= 7 and sum(profiled) >= 8
