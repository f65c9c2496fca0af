"""bench/baseline_stretches.py: the profile's two untraced stretches, read from the committed run
records by plain JSON here."""
import json

import pytest
from conftest import bench_module


@pytest.fixture(scope="module")
def stretches():
    return bench_module("baseline_stretches")


def test_the_stretch_after_the_recording_reads_slower(stretches):
    """Over the unseen sets' run records, the stretch timed after the recording is slower than the
    one before it in most profiles (183 of 234 on 2026-11-28): what an untraced time above the
    traced period comes from, rather than a slow start."""
    found = stretches.records()
    assert len(found) >= 234
    for path, (before, after) in found.items():
        assert [before, after] == json.loads(path.read_text())["untraced"]["gpu_ms_by_chunk"]
    slower = sum(after > before for before, after in found.values())
    assert slower >= 0.75 * len(found)


def test_the_prediction_s_eager_time_is_the_untraced_time_wherever_measured(stretches):
    """Each compared profile's eager time is its untraced time times the model's factor (never
    below GPU busy), the traced estimate nowhere, also where the untraced time reads above the
    traced period."""
    from advisor import predict as pr

    model = pr.load_model()
    rows = [r for r in pr.read_dataset(stretches.RESULTS / "paired_timing/one_gpu_2026-11-28/first/unseen_rows.csv")]
    above = [r for r in rows if float(r["baseline_ms"]) > float(r["period_ms"])]
    assert above   # super_resolution, two_losses_by_hand, train_eval_toggle, word_language_model
    for r in rows:
        assert pr.eager_ms(r, model) == (max(float(r["busy_ms"]), float(r["baseline_ms"]) * model["baseline_factor"]),
                                         "measured")
