"""The analyser on real exports, checked against plain SQL written here (and nsys stats)."""

import csv
import statistics

import pytest

from advisor.analysis import analyse
from advisor.trace import is_fusible_kernel, open_trace
from conftest import TRACES, rewrite, sample, sql

EAGER = ["launch_eager", "compute_eager", "mixed_eager", "sync_eager", "infer_eager"]
ALL = EAGER + ["launch_graphed", "compute_graphed", "launch_graphed_node"]

# Union of every GPU interval, in SQL alone: islands of overlapping intervals (gaps-and-islands).
ISLANDS = """
WITH ops AS (
  SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL
  UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY
  {graph}
), ordered AS (
  SELECT start, end, MAX(end) OVER (ORDER BY start, end ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM ops
), marked AS (
  SELECT start, end, SUM(CASE WHEN reach IS NULL OR start > reach THEN 1 ELSE 0 END)
         OVER (ORDER BY start, end ROWS UNBOUNDED PRECEDING) AS island
  FROM ordered
)
SELECT MIN(start), MAX(end) FROM marked GROUP BY island ORDER BY 1
"""

# First GPU operation launched from inside each iteration range (same process, launching call
# inside the range), by correlationId.
ITERATION_STARTS = """
WITH it AS (
  SELECT n.start, n.end, n.globalTid & -16777216 AS pid
  FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId WHERE s.value = ?
), ops AS (
  SELECT start, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL
  UNION ALL SELECT start, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY
  {graph}
)
SELECT it.start, MIN(o.start)
FROM it JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON (r.globalTid & -16777216) = it.pid AND r.start BETWEEN it.start AND it.end
JOIN ops o ON o.correlationId = r.correlationId AND o.globalPid = it.pid
GROUP BY it.start ORDER BY it.start
"""


def has_table(path, table):
    return bool(sql(path, "SELECT 1 FROM sqlite_master WHERE name = ?", table))


def graph_union(path, cols):
    """The tables that exist only when they have rows: memsets and graph replays."""
    tables = ("CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    return " ".join(f"UNION ALL SELECT {cols} FROM {t}" for t in tables if has_table(path, t))


def islands(path):
    return sql(path, ISLANDS.format(graph=graph_union(path, "start, end")))


def clipped_busy(isl, a, b):
    return sum(max(0, min(e, b) - max(s, a)) for s, e in isl)


def sql_windows(path, name="cg-advise:iteration"):
    starts = [first for _, first in sql(path, ITERATION_STARTS.format(
        graph=graph_union(path, "start, correlationId, globalPid")), name)]
    last_end = sql(path, "SELECT MAX(end) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    return list(zip(starts, starts[1:] + [None])), last_end


@pytest.fixture(scope="module")
def analyses():
    return {name: analyse(open_trace(sample(name))) for name in ALL}


@pytest.mark.parametrize("name", ALL)
def test_kernel_count_and_time_match_sql_and_nsys_stats(name, analyses):
    trace = open_trace(sample(name))
    kernels = trace.ops[trace.ops["kind"] == 0]
    count, total = sql(sample(name), "SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]
    assert len(kernels) == count
    assert int((kernels["end"] - kernels["start"]).sum()) == total
    with open(TRACES / "nsys_stats" / f"{name}_cuda_gpu_kern_sum.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert sum(int(r["Instances"]) for r in rows) == count
    assert sum(int(r["Total Time (ns)"]) for r in rows) == total


@pytest.mark.parametrize("name", ALL)
def test_total_busy_is_the_sql_union(name):
    from advisor.intervals import Union

    trace = open_trace(sample(name))
    ours = Union.of(trace.ops["start"], trace.ops["end"]).total
    theirs = sum(e - s for s, e in islands(sample(name)))
    assert ours == theirs
    span = trace.ops["end"].max() - trace.ops["start"].min()
    plain_sum = int((trace.ops["end"] - trace.ops["start"]).sum())
    assert 0 < ours <= span and ours <= plain_sum


@pytest.mark.parametrize("name", ["launch_eager", "compute_eager", "mixed_eager", "sync_eager", "launch_graphed"])
def test_iterations_busy_period_utilization_match_sql(name, analyses):
    path = sample(name)
    windows, last_end = sql_windows(path)
    group = analyses[name].main
    assert [it["gpu_start_ns"] for it in group.iterations] == [a for a, _ in windows]
    isl = islands(path)
    our_last_end = group.iterations[-1]["gpu_start_ns"] + group.iterations[-1]["gpu_period_ms"] * 1e6
    windows[-1] = (windows[-1][0], round(our_last_end))
    assert windows[-1][1] <= last_end or has_table(path, "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    busy = [clipped_busy(isl, a, b) for a, b in windows]
    period = [b - a for a, b in windows]
    s = group.summary
    assert s.iterations == len(windows)
    assert s.gpu_busy_ms_per_iteration == pytest.approx(statistics.median(busy) / 1e6, rel=1e-9)
    assert s.gpu_period_ms == pytest.approx(statistics.median(period) / 1e6, rel=1e-9)
    assert s.gpu_utilization == pytest.approx(statistics.median(b / p for b, p in zip(busy, period)), rel=1e-9)
    assert 0 < s.gpu_utilization <= 1
    assert s.ideal_graphed_ms == s.gpu_busy_ms_per_iteration


@pytest.mark.parametrize("name", ["launch_eager", "mixed_eager"])
def test_kernels_and_gaps_per_iteration_match_sql(name, analyses):
    path = sample(name)
    group = analyses[name].main
    windows = [(it["gpu_start_ns"], it["gpu_start_ns"] + round(it["gpu_period_ms"] * 1e6)) for it in group.iterations]
    kernel_starts = [row[0] for row in sql(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    kernels = [sum(a <= t < b for t in kernel_starts) for a, b in windows]
    assert group.summary.kernels_per_iteration == statistics.median(kernels)
    isl = islands(path)
    gap_starts = [e for (s, e), _ in zip(isl, isl[1:])]
    gaps = [sum(a <= g < b - 1 for g in gap_starts) for a, b in windows]
    assert group.summary.gaps_per_iteration == statistics.median(gaps)
    assert group.summary.gaps.count == sum(gaps)
    assert sum(group.summary.gaps.histogram.values()) == sum(gaps)


def test_launch_cost_and_launch_to_start_match_sql(analyses):
    path = sample("launch_eager")
    rows = sql(path, """
        SELECT k.start - r.end, r.end - r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.correlationId = k.correlationId AND (r.globalTid & -16777216) = k.globalPid""")
    s = analyses["launch_eager"].main.summary
    assert s.launch_to_start_median_us == pytest.approx(statistics.median(d for d, _ in rows) / 1e3)
    assert s.launch_api_median_us == pytest.approx(statistics.median(c for _, c in rows) / 1e3)


def test_syncs_per_iteration_match_sql(analyses):
    path = sample("sync_eager")
    its = sql(path, """SELECT n.start, n.end FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                       WHERE s.value = 'cg-advise:iteration' ORDER BY n.start""")
    cpu = [(a, b) for (a, _), (b, _) in zip(its, its[1:])] + [its[-1]]
    syncs = [row[0] for row in sql(path, """SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r
             JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaStreamSynchronize%'""")]
    per_iteration = [sum(a <= t < b for t in syncs) for a, b in cpu]
    s = analyses["sync_eager"].main.summary
    assert s.syncs_per_iteration == statistics.median(per_iteration) == 1
    assert s.sync_calls == {"cudaStreamSynchronize": sum(per_iteration)}
    assert analyses["launch_eager"].main.summary.syncs_per_iteration == 0


def test_module_range_projection_matches_sql(analyses):
    path = sample("launch_eager")
    per_call = sql(path, """
        SELECT n.start, COUNT(k.start) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = n.globalTid AND r.start BETWEEN n.start AND n.end
        JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId
        WHERE s.value = 'cg-advise:module:body' GROUP BY n.start""")
    body = next(r for r in analyses["launch_eager"].main.ranges if r.name == "cg-advise:module:body")
    assert body.calls == len(per_call) == 40
    assert body.kernels_per_call == statistics.median(c for _, c in per_call)


def test_graph_replays_are_busy_time_and_counted(analyses):
    path = sample("launch_graphed")
    replays = sql(path, "SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")[0][0]
    launches = sql(path, """SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
                            WHERE s.value LIKE 'cudaGraphLaunch%'""")[0][0]
    assert replays == launches == 40
    a = analyses["launch_graphed"]
    assert a.trace["graph_trace_mode"] == "graph"
    s = a.main.summary
    assert s.graph_launches_per_iteration == 1
    assert s.graphed_share > 0.5 and s.verdict == "graphed"
    node = analyses["launch_graphed_node"]
    assert node.trace["graph_trace_mode"] == "node"
    assert sql(sample("launch_graphed_node"), "SELECT COUNT(graphNodeId) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] > 0


def test_verdicts_of_the_workloads(analyses):
    verdicts = {name: a.main.summary.verdict for name, a in analyses.items()}
    assert verdicts["launch_eager"] == "launch-bound"
    assert verdicts["infer_eager"] == "launch-bound"
    assert verdicts["compute_eager"] == "gpu-bound"
    assert verdicts["compute_graphed"] == "graphed"
    ranges = {r.name: r.verdict for r in analyses["compute_eager"].main.ranges}
    assert ranges["cg-advise:module:stem"] == "gpu-bound"
    ranges = {r.name: r.verdict for r in analyses["launch_eager"].main.ranges}
    assert ranges["cg-advise:module:body"] == "launch-bound"


def test_inference_iterations_are_forward_calls(analyses):
    path = sample("infer_eager")
    forwards = sql(path, """SELECT COUNT(*) FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
                            WHERE s.value = 'cg-advise:forward'""")[0][0]
    s = analyses["infer_eager"].main.summary
    assert forwards == s.iterations == 60
    assert "cg-advise:forward" in s.iteration_source


TRAIN_STEPS = """SELECT COUNT(*) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
                 WHERE coalesce(s.value, n.text) = 'train_step'"""


def test_iteration_pattern_picks_the_scripts_own_range():
    # The graphed script marks its own step as 'train_step' (torch.cuda.nvtx: text, not textId).
    a = analyse(open_trace(sample("launch_graphed")), "^train_step$")
    assert a.main.summary.iterations == sql(sample("launch_graphed"), TRAIN_STEPS)[0][0] == 40


def test_repeated_top_level_range_is_the_fallback(copy_sample):
    path = copy_sample("launch_graphed")
    rewrite(path, "DELETE FROM NVTX_EVENTS WHERE textId IN (SELECT id FROM StringIds WHERE value LIKE 'cg-advise:%')")
    s = analyse(open_trace(path)).main.summary
    assert s.iterations == sql(path, TRAIN_STEPS)[0][0] == 40
    assert s.iteration_source == "repeated top-level range 'train_step'"


def test_whole_run_without_iteration_ranges(copy_sample):
    """No range, and no training step repeated in the kernels (an inference loop: one thread,
    no optimizer; a training run is cut at its repeated step, tests/test_user_ranges.py)."""
    path = copy_sample("infer_eager")
    rewrite(path, "DELETE FROM NVTX_EVENTS")
    s = analyse(open_trace(path)).main.summary
    isl = islands(path)
    first, last = isl[0][0], isl[-1][1]
    assert s.iterations == 1 and s.iteration_source.startswith("whole run")
    assert s.gpu_period_ms == pytest.approx((last - first) / 1e6)
    assert s.gpu_busy_ms_per_iteration == pytest.approx(sum(e - b for b, e in isl) / 1e6)


def test_iteration_ranges_without_gpu_work_fall_back_to_the_whole_run(copy_sample):
    path = copy_sample("launch_eager")
    # two ranges named 'idle' before the first CUDA call of the run: they launch nothing
    first_call = sql(path, "SELECT MIN(start) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    tid = sql(path, "SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start LIMIT 1")[0][0]
    rewrite(path, f"""INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)
                      VALUES ({first_call - 3000}, {first_call - 2000}, 59, 'idle', {tid}),
                             ({first_call - 1000}, {first_call - 500}, 59, 'idle', {tid})""")
    s = analyse(open_trace(path), "^idle$").main.summary
    assert s.iterations == 1
    assert s.iteration_source == "whole run (the --iteration-range '^idle$' launched no GPU work)"


def test_numbered_range_names_are_one_group(copy_sample):
    """'step 1', 'step 2', ...: iterations and per-range figures group them as 'step #'."""
    path = copy_sample("launch_eager")
    rewrite(path, """UPDATE NVTX_EVENTS SET text = 'step ' || rowid, textId = NULL
                     WHERE textId IN (SELECT id FROM StringIds WHERE value = 'cg-advise:iteration');
                     DELETE FROM NVTX_EVENTS
                     WHERE textId IN (SELECT id FROM StringIds WHERE value = 'cg-advise:forward')""")
    numbered = sql(path, "SELECT COUNT(DISTINCT text) FROM NVTX_EVENTS WHERE text LIKE 'step %'")[0][0]
    analysis = analyse(open_trace(path))
    s = analysis.main.summary
    assert numbered == s.iterations == 40
    assert s.iteration_source == "repeated top-level range 'step #'"
    assert [r.calls for r in analysis.main.ranges if r.name == "step #"] == [40]


@pytest.mark.parametrize("name", EAGER + ["zoo_cnn_amp_profiled"])
def test_fusible_kernel_share_matches_sql(name):
    """compile's evidence on a GPU-bound trace: the share of kernel time in the kernel families it
    generates itself, from the kernels' short names joined in SQL here (the rule, which names
    count, is the product's definition; the sum is this test's)."""
    rows = sql(sample(name), "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                             "JOIN StringIds s ON s.id = k.shortName")
    total = sum(duration for _, duration in rows)
    fusible = sum(duration for kernel, duration in rows if is_fusible_kernel(kernel))
    summary = analyse(open_trace(sample(name))).main.summary
    assert summary.fusible_kernel_share == pytest.approx(fusible / total, rel=1e-9)
    assert 0 < summary.fusible_kernel_share < 1


def test_fusible_kernels_are_named_not_sized():
    """A GEMM library's reduction is not fusible though its name holds `reduce_kernel`; cuDNN's
    batch norm and layout kernels are, whatever their length."""
    assert not is_fusible_kernel("splitKreduce_kernel") and not is_fusible_kernel("void cutlass::Kernel2<x>")
    assert is_fusible_kernel("bn_bw_1C11_kernel_new") and is_fusible_kernel("nchwToNhwcKernel")
    assert is_fusible_kernel("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>")
