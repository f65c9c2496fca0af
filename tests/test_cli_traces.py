"""Exports written by `cg-advise profile` on the GPU: a window, a crash, two DDP processes."""

import statistics

from advisor.analysis import analyse
from advisor.trace import open_trace
from conftest import sample, sql

ITERATION_RANGES = """SELECT n.globalTid & -16777216, COUNT(*) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                      WHERE s.value = 'cg-advise:iteration' GROUP BY 1 ORDER BY 1"""


def test_window_recorded_only_its_iterations():
    # profiled with --warmup 20 --iterations 10 of a 100000-step run
    [(_, count)] = sql(sample("cli_window"), ITERATION_RANGES)
    assert analyse(open_trace(sample("cli_window"))).main.summary.iterations == count == 10


def test_crashed_script_partial_report():
    # the script raised after 15 steps; its partial report is still analysed
    [(_, count)] = sql(sample("cli_crash"), ITERATION_RANGES)
    assert analyse(open_trace(sample("cli_crash"))).main.summary.iterations == count == 15


def test_every_process_of_a_ddp_run_is_analysed():
    path = sample("cli_ddp2")
    pairs = sql(path, "SELECT DISTINCT globalPid, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1, 2")
    per_process = dict(sql(path, ITERATION_RANGES))
    analysis = analyse(open_trace(path))
    assert len(pairs) == len(analysis.groups) == 2
    pids = sql(path, "SELECT globalPid, pid FROM PROCESSES")
    os_pid = {g: p for g, p in pids}
    for (global_pid, device), group in zip(pairs, analysis.groups):
        assert (group.pid, group.device) == (os_pid[global_pid], device)
        assert group.summary.iterations == per_process[global_pid] == 40
    busiest = max(analysis.groups, key=lambda g: g.summary.gpu_busy_ms_per_iteration * g.summary.iterations)
    assert analysis.main is busiest
    assert analysis.to_dict()["trace"]["processes"] == 2


def test_cli_profiled_eager_run_matches_sql_kernel_count():
    path = sample("cli_launch_eager")
    group = analyse(open_trace(path)).main
    windows = [(it["gpu_start_ns"], it["gpu_start_ns"] + round(it["gpu_period_ms"] * 1e6)) for it in group.iterations]
    starts = [s for (s,) in sql(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    assert group.summary.kernels_per_iteration == statistics.median(sum(a <= t < b for t in starts) for a, b in windows)
    assert group.summary.verdict == "launch-bound"
