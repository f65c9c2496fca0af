"""bench/collect_dataset.py sizes tune's run of a zoo script by the profile's untraced baseline,
so that tune times every workload over seconds, as it times a user's script of that length
(graphed windows of 50 ms past the minimum), not in the 10-step windows of a 200-step run."""
import pytest
from conftest import bench_module


@pytest.fixture(scope="module")
def collect():
    return bench_module("collect_dataset")


def record(ms):
    return {"untraced": {"gpu_ms_per_iteration": ms, "host_ms_per_iteration": ms * 1.01}}


def test_tune_runs_the_script_for_the_seconds_asked(collect):
    assert collect.tune_steps(record(2.4), 5.0) == 2084            # ceil(5000 / 2.4)
    assert collect.tune_steps(record(4.0), 4.0) == 1000


def test_tune_steps_stay_within_their_bounds(collect):
    assert collect.tune_steps(record(0.5), 5.0) == 5000            # 10000 wanted: capped
    assert collect.tune_steps(record(50.0), 5.0) == 200            # 100 wanted: the old fixed count
    assert collect.tune_steps(None, 5.0) == 200                    # a profile without a baseline
    assert collect.tune_steps({"untraced": {}}, 5.0) == 200
    assert collect.tune_steps(record(2.4), 0) == 200               # --tune-seconds 0: as before
