"""Where a full-iteration graph's time goes, read from traces of the rewrite replaying
(``bench/gpu_graph_replay_traces.sh``), set beside what the benefit model predicted for the
same loop from its eager profile.

For each NAME_graph.sqlite (``--cuda-graph-trace=graph``: one GRAPH_TRACE row per replay) the
steady replays (the first fifth left out): the GPU span of one replay, the period from one
replay's start to the next (the graphed ms/iteration as traced), the GPU's idle time between
two replays, and the host's CUDA API time per iteration (the graph launch, the inputs' copies,
syncs). For NAME_node.sqlite (``=node``: the graph's kernels one by one): the kernels' busy
time inside one replay and the gaps between them, per node. The prediction's sides come from
the profile's dataset rows (``--rows``, the newest row of each loop on the same GPU) and the
shipped model.

    python bench/graph_replay_split.py DIR [--rows ROWS.csv ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor import predict as pr  # noqa: E402
from advisor.columns import read_only_uri  # noqa: E402
from advisor.trace import strip_version  # noqa: E402

STEADY_FROM = 0.2   # the share of replays left out at the start (capture, warm caches, clocks)


def _steady(rows: list) -> list:
    return rows[int(len(rows) * STEADY_FROM):]


def replay_split(path: Path) -> dict:
    """The steady replays of the graph replayed most often in a ``graph``-mode export."""
    db = sqlite3.connect(read_only_uri(path), uri=True)
    graph = db.execute("SELECT graphId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE GROUP BY graphId "
                       "ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    # each replay with the host time its cudaGraphLaunch call started (the same correlationId):
    # a GPU-bound loop's host runs ahead of its replays, so the host's stretch is its own
    replays = _steady(db.execute(
        "SELECT g.start, g.end, r.start FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE g "
        "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
        "WHERE g.graphId = ? ORDER BY g.start", (graph,)).fetchall())
    spans = [(end - start) / 1e6 for start, end, _ in replays]
    periods = [(b[0] - a[0]) / 1e6 for a, b in zip(replays, replays[1:])]
    idle = [(b[0] - a[1]) / 1e6 for a, b in zip(replays, replays[1:])]
    n = max(len(replays) - 1, 1)
    # the host's CUDA calls from the first steady replay's launch to the last one's, per replay:
    # what each costs the host, by name
    calls = db.execute(
        "SELECT s.value, count(*), sum(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "JOIN StringIds s ON s.id = r.nameId WHERE r.start >= ? AND r.start < ? GROUP BY s.value",
        (replays[0][2], replays[-1][2])).fetchall()
    api = {strip_version(name): {"calls": count / n, "ms": total / n / 1e6} for name, count, total in calls}
    # GPU work outside the graph between the steady replays (the inputs' copies: kernels, memcpys)
    outside = sum(db.execute(f"SELECT coalesce(sum(end - start), 0) FROM {table} WHERE start >= ? AND start < ?",
                             (replays[0][0], replays[-1][0])).fetchone()[0]
                  for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")) / n / 1e6
    return {"replays": len(replays), "span_ms": statistics.median(spans), "period_ms": statistics.median(periods),
            "idle_ms": statistics.median(idle), "outside_gpu_ms": outside,
            "api_ms": sum(v["ms"] for v in api.values()), "api": api}


def node_split(path: Path) -> dict:
    """Inside one replay of a ``node``-mode export: its nodes (kernels, memsets and memcpys
    with a ``graphNodeId``), their busy time, the span from the first node's start to the last
    one's end, and the gaps between one node's end and the next one's start: their median
    (what most nodes cost) and their mean per node (one long stall moves it)."""
    db = sqlite3.connect(read_only_uri(path), uri=True)
    rows = db.execute(" UNION ALL ".join(
        f"SELECT correlationId, start, end FROM {table} WHERE graphNodeId IS NOT NULL"
        for table in NODE_TABLES if _has_column(db, table, "graphNodeId")) + " ORDER BY start").fetchall()
    replays: dict = {}
    for correlation, start, end in rows:
        replays.setdefault(correlation, []).append((start, end))
    common = statistics.mode(len(k) for k in replays.values())
    kept = _steady([k for k in replays.values() if len(k) == common])
    busy = [sum(e - s for s, e in k) / 1e6 for k in kept]
    span = [(max(e for _, e in k) - k[0][0]) / 1e6 for k in kept]
    gaps = [(b[0] - a[1]) / 1e3 for k in kept for a, b in zip(k, k[1:])]
    return {"replays": len(kept), "nodes": common, "busy_ms": statistics.median(busy),
            "span_ms": statistics.median(span), "gap_us_median": statistics.median(gaps),
            "gap_us_per_node": statistics.median((s - b) * 1e3 / max(common - 1, 1) for s, b in zip(span, busy))}


NODE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMCPY")


def _has_column(db, table: str, column: str) -> bool:
    """Whether the export has ``table`` with ``column`` (an export without memsets has no
    MEMSET table; older ones lack ``graphNodeId``)."""
    return any(row[1] == column for row in db.execute(f"PRAGMA table_info({table})"))


def predicted(rows_files: list, gpu_words: str = "H200") -> dict:
    """Per loop, the last dataset row read (the files in the order given) of those profiled on a
    GPU whose name holds ``gpu_words``: the prediction's GPU and host sides and the busy time and
    operations it started from."""
    model = pr.load_model(None)
    out = {}
    for path in rows_files:
        for row in pr.read_dataset(path):
            if gpu_words not in str(row.get("gpu", "")):
                continue
            sides = pr.physical(row, "full_iteration", model)
            out[row["workload"]] = {"busy_ms": pr._value(row, "busy_ms"), "ops": pr._value(row, "ops"),
                                    "gpu_ms": sides["gpu_ms"], "host_ms": sides["host_ms"], "ms": sides["ms"],
                                    "capturable_ms": pr.capturable_ms(row, model), "rows": str(path)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", type=Path, help="the folder bench/gpu_graph_replay_traces.sh wrote")
    parser.add_argument("--rows", type=Path, nargs="*", default=[], help="dataset rows of the loops' profiles")
    parser.add_argument("--gpu", default="H200", help="take the rows profiled on a GPU whose name holds this")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    expected = predicted(args.rows, args.gpu)
    out = {}
    for path in sorted(args.traces.glob("*_graph.sqlite")):
        name = path.name[: -len("_graph.sqlite")]
        out[name] = {"graph": replay_split(path), "predicted": expected.get(name)}
        node = args.traces / f"{name}_node.sqlite"
        if node.exists():
            out[name]["node"] = node_split(node)
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"{'loop':22s} {'span':>6s} {'period':>6s} {'idle':>6s} {'api':>6s} | {'busy':>6s} {'ops':>4s} {'cap':>6s} "
          f"{'gpu':>6s} {'host':>6s} {'pred':>6s} | span/gpu  nodes busy-in-graph gap-median gap/node")
    for name, r in out.items():
        g, p, n = r["graph"], r["predicted"] or {}, r.get("node")
        line = (f"{name:22s} {g['span_ms']:6.3f} {g['period_ms']:6.3f} {g['idle_ms']:6.3f} {g['api_ms']:6.3f} | "
                f"{p.get('busy_ms', float('nan')):6.3f} {p.get('ops', float('nan')):4.0f} "
                f"{p.get('capturable_ms', float('nan')):6.3f} {p.get('gpu_ms', float('nan')):6.3f} "
                f"{p.get('host_ms', float('nan')):6.3f} {p.get('ms', float('nan')):6.3f} | "
                f"{g['span_ms'] / p['gpu_ms'] if p else float('nan'):8.2f}")
        if n:
            line += f"  {n['nodes']:5d} {n['busy_ms']:14.3f} {n['gap_us_median']:10.2f} {n['gap_us_per_node']:8.2f}"
        print(line)


if __name__ == "__main__":
    main()
