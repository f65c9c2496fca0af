"""How far tune's own measurement repeats: the same loops tuned on two machine starts, each
scope's paired speedup of one against the other's, and within one tune run the eager time of
its full_iteration process against its fwd_bwd process's (seconds apart, same host). A
prediction is checked against one tune process: taken as the prediction of another, one tune's
speedup hits "within 20 %" about as often as a benefit model could that predicted each loop's
typical speedup exactly, the ceiling on these hosts.

    python bench/tune_repeatability.py [FOLDER ...] [--h200] [--json]

Each FOLDER holds tune results (``NAME.tune.json`` or ``NAME.py.cg-advise.json``); the default
is every set timed as tune times now on the H100 (``unseen_eval.NOW``), with ``--h200`` the
H200's (``unseen_eval.NOW_H200``).
"""

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from paired_vs_predicted import TUNE_RESULT_NAMES, close, tune_result, tuned_row  # noqa: E402
from unseen_eval import GRAPH_PAIR, NOW, NOW_H200, RESULTS, SETS  # noqa: E402

TOLERANCE = 0.2


def tune_rows(folder: Path) -> dict:
    """{loop: {scope: tune's row}} for the graph scopes measured ok and paired in this folder
    (each loop's result file as ``paired_vs_predicted.compare`` picks it)."""
    suffixes = tuple(name.format("") for name in TUNE_RESULT_NAMES)
    loops = sorted({p.name[:-len(s)] for p in folder.iterdir() for s in suffixes if p.name.endswith(s)})
    out = {}
    for loop in loops:
        result = json.loads(tune_result(folder, loop).read_text())
        out[loop] = {scope: row for scope in GRAPH_PAIR if (row := tuned_row(result, scope)) is not None}
    return out


def read_runs(folders) -> dict:
    """{folder: its tune_rows}: each folder's files read once, for the figures below."""
    return {folder: tune_rows(folder) for folder in folders}


def as_predictions(a: float, b: float, tolerance: float = TOLERANCE) -> int:
    """Each of two tunes' speedups taken as the prediction of the other, as ``unseen_eval``
    counts a prediction (``close``): how many of the two hit."""
    return close(a, b, tolerance) + close(b, a, tolerance)


def between_runs(runs: dict) -> dict:
    """{scope: [(loop, folder a, folder b, speedup a, speedup b)]}: every pair of runs of one loop
    (``runs``: ``read_runs``)."""
    out = {scope: [] for scope in GRAPH_PAIR}
    for (fa, a), (fb, b) in itertools.combinations(runs.items(), 2):
        for loop in sorted(set(a) & set(b)):
            for scope in GRAPH_PAIR:
                if scope in a[loop] and scope in b[loop]:
                    out[scope].append((loop, fa, fb, a[loop][scope]["paired_speedup"], b[loop][scope]["paired_speedup"]))
    return out


def within_run(loops: dict) -> list:
    """[(loop, full_iteration's process's eager ms over fwd_bwd's)] of one tune run (``loops``:
    its folder's ``tune_rows``)."""
    return [(loop, rows["full_iteration"]["paired_eager_ms"] / rows["fwd_bwd"]["paired_eager_ms"])
            for loop, rows in loops.items()
            if all(rows.get(s, {}).get("paired_eager_ms") for s in GRAPH_PAIR)]


def within_run_hits(ratios, tolerance: float = TOLERANCE) -> int:
    """The tune runs whose two processes' eager times agree as a prediction would: the
    full_iteration process's within ``tolerance`` of the fwd_bwd process's (``close``)."""
    return sum(close(r, 1.0, tolerance) for r in ratios)


def default_folders(prefixes: tuple = NOW) -> list:
    """The tune result folders of the sets timed as tune times now whose rows start with
    ``prefixes`` (NOW: the H100's; NOW_H200: the H200's), as bench/unseen_eval.py reads them."""
    return sorted({(RESULTS / results).resolve() for _, rows, results, _, _ in SETS if rows.startswith(prefixes)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="folders of tune results (default: the sets timed as tune times now)")
    parser.add_argument("--h200", action="store_true", help="the H200's sets timed as tune times now (default: the H100's)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folders = list(dict.fromkeys(f.resolve() for f in args.folders)) or default_folders(NOW_H200 if args.h200 else NOW)
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        sys.exit(f"tune_repeatability: no such folder: {', '.join(missing)}")
    try:
        read = read_runs(folders)
    except (ValueError, KeyError, TypeError) as error:   # a file that is not a tune result
        sys.exit(f"tune_repeatability: not a tune result in {', '.join(map(str, folders))}: {error!r}")
    empty = [str(f) for f, loops in read.items() if not loops]
    if empty:
        sys.exit(f"tune_repeatability: no tune results in: {', '.join(empty)}")
    pairs = between_runs(read)
    runs = [(folder, within_run(loops)) for folder, loops in read.items()]
    if args.json:
        print(json.dumps({"between_runs": {s: [[loop, str(a), str(b), x, y] for loop, a, b, x, y in v]
                                           for s, v in pairs.items()},
                          "within_run": {str(f): v for f, v in runs}}, indent=1))
        return
    for scope, found in pairs.items():
        for loop, a, b, x, y in found:
            print(f"{scope:15s} {loop:24s} {x:7.2f}x {y:7.2f}x ({y / x:.2f})  {_short(a)} / {_short(b)}")
    for scope, found in pairs.items():
        hits = sum(as_predictions(x, y) for *_, x, y in found)
        print(f"{scope}: one tune's speedup as the prediction of another tune's of the same loop: within "
              f"{TOLERANCE:.0%} for {hits} of {2 * len(found)} ({len(found)} pairs of tunes, "
              f"{len({loop for loop, *_ in found})} loops)")
    ratios = [r for _, found in runs for _, r in found]
    if ratios:
        print(f"within one tune run, full_iteration's eager time against fwd_bwd's process: within "
              f"{TOLERANCE:.0%} for {within_run_hits(ratios)} of {len(ratios)} tune runs "
              f"(log spread {statistics.pstdev(math.log(r) for r in ratios):.3f})")


def _short(folder: Path) -> str:
    return str(folder.relative_to(RESULTS)) if folder.is_relative_to(RESULTS) else str(folder)


if __name__ == "__main__":
    main()
