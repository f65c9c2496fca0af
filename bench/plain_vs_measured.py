"""Predictions from other people's exports beside what tune measured: for each script that
bench/gpu_plain_exports.sh ran, the prediction `cg-advise analyze` makes from its plain nsys
export (no bootstrap: iterations from the step its kernels repeat, the eager time estimated
from the trace) and from its `cg-advise profile` export (measured baseline, run record), each
against tune's paired speedup of the same scope in the same session.

    python bench/plain_vs_measured.py OUT [--scopes full_iteration,fwd_bwd] [--json]

The exports may be gzipped (NAME_plain.sqlite.gz, as bench/results/plain_exports_h100/ keeps
them): they are read from a temporary copy.
"""

import argparse
import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor.analysis import analyse  # noqa: E402
from advisor.predict import load_model, predictions_for  # noqa: E402
from advisor.trace import open_trace  # noqa: E402
from paired_vs_predicted import TOLERANCE, close  # noqa: E402
from tuner.search import eager_slowdown  # noqa: E402


def predicted(export: Path, record: Path | None) -> dict:
    analysis = analyse(open_trace(export))
    loaded = json.loads(record.read_text()) if record and record.exists() else None
    out = predictions_for(analysis, load_model(), loaded)
    out["iteration_source"] = analysis.main.summary.iteration_source
    out["iterations"] = analysis.main.summary.iterations
    return out


def measured(tune: Path, scope: str) -> float | None:
    rows = json.loads(tune.read_text()).get("rows", []) if tune.exists() else []
    row = next((r for r in rows if r["scope"] == scope and r["status"] == "ok" and r.get("paired_speedup")), None)
    return row["paired_speedup"] / eager_slowdown(scope) if row else None


def unpacked(folder: Path, into: Path) -> Path:
    """The folder with its gzipped exports written out as .sqlite beside the rest (into ``into``)."""
    if not list(folder.glob("*.sqlite.gz")):
        return folder
    for path in folder.iterdir():
        if path.name.endswith(".sqlite.gz"):
            with gzip.open(path) as packed, open(into / path.name[:-3], "wb") as out:
                shutil.copyfileobj(packed, out)
        elif path.is_file():
            shutil.copy(path, into / path.name)
    return into


def compare(folder: Path, scopes: list) -> list:
    with tempfile.TemporaryDirectory() as scratch:
        return _compare(unpacked(folder, Path(scratch)), scopes)


def _compare(folder: Path, scopes: list) -> list:
    out = []
    for plain in sorted(folder.glob("*_plain.sqlite")):
        name = plain.name[: -len("_plain.sqlite")]
        profiled = folder / f"{name}_eager.sqlite"
        sides = {"plain": predicted(plain, None)}
        if profiled.exists():
            sides["profiled"] = predicted(profiled, folder / f"{name}_eager.cg-advise-run.json")
        for scope in scopes:
            truth = measured(folder / f"{name}.tune.json", scope)
            row = {"script": name, "scope": scope, "measured": truth,
                   "plain_iterations": sides["plain"]["iterations"], "plain_source": sides["plain"]["iteration_source"]}
            for side, p in sides.items():
                value = (p.get(scope) or {}).get("speedup")
                row[side] = value
                row[f"{side}_within"] = close(value, truth) if value and truth else None
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--scopes", default="full_iteration,fwd_bwd")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = compare(args.folder, args.scopes.split(","))
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'script':22s} {'scope':15s} {'measured':>9s} {'plain export':>13s} {'profiled':>9s}  plain iterations")
    for r in rows:
        def fmt(v):
            return f"{v:.2f}x" if v else "-"
        print(f"{r['script']:22s} {r['scope']:15s} {fmt(r['measured']):>9s} {fmt(r.get('plain')):>13s} "
              f"{fmt(r.get('profiled')):>9s}  {r['plain_iterations']} ({r['plain_source'][:60]})")
    for side in ("plain", "profiled"):
        judged = [r[f"{side}_within"] for r in rows if r.get(f"{side}_within") is not None]
        if judged:
            print(f"{side}: within {TOLERANCE:.0%} of the measured speedup for {sum(judged)} of {len(judged)}")


if __name__ == "__main__":
    main()
