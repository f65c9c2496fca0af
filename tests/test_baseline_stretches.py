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
    one before it in most profiles (292 of 364 with the 38 profiles of 24 loops on a machine of
    four H200s and the 16 of the next machine start, 2026-11-28; 251 of 310 before them): what an
    untraced time above the traced period comes from, rather than a slow start."""
    found = stretches.records()
    assert len(found) >= 310 + 38 + 16
    for path, (before, after) in found.items():
        assert [before, after] == json.loads(path.read_text())["untraced"]["gpu_ms_by_chunk"]
    slower = sum(after > before for before, after in found.values())
    assert slower >= 0.75 * len(found)


def test_each_row_is_set_beside_the_record_it_was_built_from(stretches):
    """A set's folder may hold the profiles of several machine starts (fresh_loops_2026-11-26
    and its next_machine/): each compared row gets the record whose untraced time is the row's
    baseline, read here from the CSV and the record's JSON."""
    import csv

    from advisor import predict as pr

    rows = {}
    for _, path, _, _, _ in stretches.SETS:
        with open(stretches.RESULTS / path, newline="") as handle:
            for row in csv.DictReader(handle):
                rows[(str((stretches.RESULTS / path).parent.relative_to(stretches.RESULTS)), row["workload"])] = row
    compared = stretches.against_tune(pr.load_model())
    assert len(compared) >= 300 and sum(r[8] for r in compared) == 123 and sum(r[9] for r in compared) == 69
    for folder, workload, _, _, _, before, after, *_ in compared:
        row = rows[(folder, workload)]
        record = stretches.record_of(stretches.RESULTS / folder, row)
        untraced = json.loads(record.read_text())["untraced"]
        assert untraced["gpu_ms_per_iteration"] == pytest.approx(float(row["baseline_ms"]), rel=1e-9)
        assert [before, after] == untraced["gpu_ms_by_chunk"]
    fresh = [r for r in compared if r[0] == "paired_timing/fresh_loops_2026-11-26"]
    assert fresh and all("next_machine" not in str(stretches.record_of(stretches.RESULTS / r[0],
                                                                        rows[(r[0], r[1])])) for r in fresh)


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


def test_timed_3_s_on_both_sides_the_stretch_before_is_still_slower_than_tune(stretches):
    """The H200 set whose profiles timed 3 s before the recording and 3 s after it: the stretch
    after reads slower than the one before in nearly every profile (34 of 36), and tune's eager
    time is faster than both (the median log of tune's time over the stretch's below 0): nsys
    slows the loop from the start, so timing before the recording alone would not remove the
    model's baseline factor. Recounted here from the records' JSON and the tune files."""
    import math
    import statistics

    from advisor import predict as pr

    both = {path: chunks for path, chunks in stretches.records().items()
            if str(path).startswith(str(stretches.RESULTS / stretches.H200_STRETCHES))}
    assert len(both) == 36
    for path in both:
        untraced = json.loads(path.read_text())["untraced"]
        assert untraced["chunks"][0] > 300 and sum(untraced["host_ms"][:untraced["chunks"][0]]) >= 3000
    assert sum(after > before for before, after in both.values()) >= 32
    compared = [r for r in stretches.against_tune(pr.load_model()) if r[9]]
    before = statistics.median(math.log(r[3] / r[5]) for r in compared)
    after = statistics.median(math.log(r[3] / r[6]) for r in compared)
    assert after < before < 0


def test_the_h200_set_predicted_from_one_stretch(stretches):
    """Each H200 row's untraced time replaced by one of its record's stretches (each row has its
    record, both stretches 3 s long, read here by plain JSON): every variant counts the same
    measurements, and the stretch after the recording (the default's figure, times the model's
    factor) does no worse for full_iteration than the 3 s before it (30 and 26 of 35)."""
    from advisor import predict as pr

    model = pr.load_model()
    hits = stretches.one_stretch_hits(model)
    # every row of those sets has its record, with both stretches, each of them 3 s long or more
    for _, rows, *_ in stretches.SETS:
        if rows.startswith(stretches.H200_STRETCHES):
            folder = (stretches.RESULTS / rows).parent
            for row in pr.read_dataset(stretches.RESULTS / rows):
                untraced = json.loads(stretches.record_of(folder, row).read_text())["untraced"]
                assert len(untraced["gpu_ms_by_chunk"]) == 2
                first = untraced["chunks"][0]
                assert min(sum(untraced["host_ms"][:first]), sum(untraced["host_ms"][first:])) >= 2900
    assert {label: {scope: n for scope, (_, n) in scopes.items()} for label, scopes in hits.items()} == {
        label: {"full_iteration": 35, "fwd_bwd": 34} for label in hits}
    before = hits["the 3 s before the recording"]["full_iteration"][0]
    assert hits["the 3 s after the recording"]["full_iteration"][0] >= before
