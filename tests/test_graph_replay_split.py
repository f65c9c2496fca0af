"""bench/graph_replay_split.py on two real exports of full-iteration rewrites replaying on the
H200 (bench/results/graph_replay_h200_2026-11-28/): the figures recounted here in plain SQL."""
import sqlite3
import statistics

from pathlib import Path

import pytest
from conftest import bench_module

FOLDER = Path(__file__).resolve().parent.parent / "bench" / "results" / "graph_replay_h200_2026-11-28"


@pytest.fixture(scope="module")
def split():
    return bench_module("graph_replay_split")


def test_a_replays_span_and_period_are_the_graph_trace_rows(split):
    path = FOLDER / "nadam_regression_graph.sqlite"
    db = sqlite3.connect(path)
    rows = db.execute("""
        WITH ranked AS (SELECT start, end, ROW_NUMBER() OVER (ORDER BY start) - 1 AS k, COUNT(*) OVER () AS n
                        FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE
                        WHERE graphId = (SELECT graphId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE
                                         GROUP BY graphId ORDER BY COUNT(*) DESC LIMIT 1))
        SELECT start, end, LEAD(start) OVER (ORDER BY start) FROM ranked WHERE k >= CAST(n * 0.2 AS INT)
        ORDER BY start""").fetchall()
    found = split.replay_split(path)
    assert found["replays"] == len(rows) > 200
    assert found["span_ms"] == pytest.approx(statistics.median((e - s) / 1e6 for s, e, _ in rows))
    assert found["period_ms"] == pytest.approx(statistics.median((n - s) / 1e6 for s, _, n in rows if n))
    assert found["idle_ms"] == pytest.approx(statistics.median((n - e) / 1e6 for _, e, n in rows if n))
    # one graph launch a replay, counted from the first steady replay's launch call (the same
    # correlationId) to the last one's: this loop's host runs ahead of its replays
    first, last = db.execute("""
        SELECT MIN(r.start), MAX(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN CUPTI_ACTIVITY_KIND_GRAPH_TRACE g ON g.correlationId = r.correlationId
        WHERE g.start >= ?""", (rows[0][0],)).fetchone()
    launches = db.execute("""
        SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
        WHERE s.value LIKE 'cudaGraphLaunch%' AND r.start >= ? AND r.start < ?""", (first, last)).fetchone()[0]
    assert found["api"]["cudaGraphLaunch"]["calls"] == pytest.approx(launches / (len(rows) - 1)) == 1.0


def test_inside_a_replay_the_nodes_busy_time_and_gaps(split):
    path = FOLDER / "logging_in_step_node.sqlite"
    db = sqlite3.connect(path)
    nodes_of = """SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL
                  UNION ALL SELECT correlationId, start, end FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE graphNodeId IS NOT NULL"""
    per_replay = db.execute(f"""
        SELECT COUNT(*), SUM(end - start), MAX(end) - MIN(start), correlationId FROM ({nodes_of})
        GROUP BY correlationId ORDER BY MIN(start)""").fetchall()
    nodes = statistics.mode(n for n, *_ in per_replay)
    kept = [(busy, span, c) for n, busy, span, c in per_replay if n == nodes]
    kept = kept[int(len(kept) * 0.2):]
    found = split.node_split(path)
    assert (found["nodes"], found["replays"]) == (nodes, len(kept))
    assert db.execute("SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_MEMSET WHERE graphNodeId IS NOT NULL").fetchone()[0] > 0
    assert found["busy_ms"] == pytest.approx(statistics.median(b / 1e6 for b, _, _ in kept))
    assert found["span_ms"] == pytest.approx(statistics.median(s / 1e6 for _, s, _ in kept))
    assert found["gap_us_per_node"] == pytest.approx(
        statistics.median((s - b) / 1e3 / (nodes - 1) for b, s, _ in kept))
    # the gaps one by one, each node's start after the end of the one before it in its replay
    gaps = []
    for _, _, correlation in kept:
        gaps += [g for (g,) in db.execute(f"""
            SELECT start - LAG(end) OVER (ORDER BY start) FROM ({nodes_of}) WHERE correlationId = ?""",
                                           (correlation,)).fetchall() if g is not None]
    assert found["gap_us_median"] == pytest.approx(statistics.median(gaps) / 1e3)
    # one long stall in each replay moves the mean gap, not the median
    assert found["gap_us_per_node"] > 2 * found["gap_us_median"] > 0
    assert found["span_ms"] > found["busy_ms"] > 0
