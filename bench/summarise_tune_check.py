"""The figures of bench/results/gpu_tune_check.json as a table: per workload the winner, its
speedup and recovered share, the checks of issue #5 (winner within 3 % of the fastest, never
slower than eager) and of issue #6 (patched script matches eager, its time within 5 % of tune's),
and, where each ran in several processes, how far those processes spread (slowest/fastest).

    python bench/summarise_tune_check.py [bench/results/gpu_tune_check.json]
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rows(results: dict):
    for section, workloads in results.items():
        if not isinstance(workloads, dict) or section == "notes":
            continue
        for name, r in workloads.items():
            if "candidates" not in r:
                continue
            win = r["candidates"].get(r["winner"], {})
            yield (section, name, f"{r['eager_ms']:.3f}", r["winner"], f"{win.get('speedup') or 1:.2f}x",
                   f"{win['recovered']:.0%}" if win.get("recovered") is not None else "-",
                   ", ".join(f"{s} {c['speedup']:.2f}x" if c.get("speedup") else f"{s} {c['failure'] or c['status']}"
                             for s, c in r["candidates"].items() if s != r["winner"]) or "-",
                   "yes" if r["winner_within_3pct_of_fastest"] and r["winner_not_slower_than_eager"] else "NO",
                   {True: "yes", False: "NO", None: "-"}[r.get("patched_matches_eager")],
                   f"{r['patched_vs_tune']:.3f}" if r.get("patched_vs_tune") else "-",
                   spreads(win.get("run_ms"), r.get("patched_run_ms")))


def spreads(*run_lists) -> str:
    """Slowest/fastest process of tune's winner and of the patched script, when run several times."""
    found = [f"{max(ms) / min(ms):.2f}" for ms in run_lists if ms and len(ms) > 1]
    return " / ".join(found) if found else "-"


def main():
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "results" / "gpu_tune_check.json"
    results = json.loads(path.read_text())
    print("| run | workload | eager ms | winner | speedup | recovered | other candidates | #5 checks | "
          "patched = eager | patched / tune time | run spread (tune / patched) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows(results):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
