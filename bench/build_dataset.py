"""Builds the benefit model's dataset CSV from what bench/collect_dataset.py brought back.

Trace features are recomputed here from the exports with the current analyser (so a change
to the analyser reaches the dataset without the GPU); the run record gives the measured
baseline, the calibration and the scopes as applied; tune's rows give the measured times.

    python bench/build_dataset.py COLLECTED_DIR [COLLECTED_DIR ...] -o advisor/data/dataset_h100.csv
    python bench/build_dataset.py --keep advisor/data/dataset_h200.csv NEW_DIR -o advisor/data/dataset_h200.csv
    python bench/build_dataset.py --update advisor/data/dataset_h100.csv NEW_DIR -o advisor/data/dataset_h100.csv

Each COLLECTED_DIR holds rows.jsonl and traces/ (unpacked from collect_dataset's tarball).
``--keep`` takes the rows of an earlier build as they are (their traces need not be here);
``--update`` takes them too, but a workload collected again replaces its old row in place,
keeping the old row's measured speedup of a scope the new collection did not measure.
``param_tensors`` comes from the run record (the bootstrap counts the trained parameter
tensors); a record from before that count is filled in by the same count over the zoo
model (bench/zoo.py built on the meta device), which is what the bootstrap would have seen.
``capturable_params`` and ``capturable_elements`` (what a full-iteration graph makes
capturable) are filled from the row's optimizer where the record predates that count, and
``syncs_after_backward`` from the zoo script of the row's shape (its GradScaler) and
``syncs_in_model`` from its shape (the Hugging Face models' mask read) where the summary
predates them.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))   # zoo.py, for the rows whose record did not count parameters

from advisor.analysis import analyse  # noqa: E402
from advisor.inject import count_trained_parameters  # noqa: E402
from advisor.predict import FEATURE_COLUMNS, SCOPES, features_of  # noqa: E402
from advisor.trace import open_trace  # noqa: E402
from zoo import ZOO  # noqa: E402

COLUMNS = ("workload", "family", "shape", "optimizer", "gpu", *FEATURE_COLUMNS, "eager_ms",
           *(f"{scope}_{what}" for scope in SCOPES for what in ("ms", "status")))


def rows_of(folder: Path):
    for line in (folder / "rows.jsonl").read_text().splitlines():
        row = json.loads(line)
        trace = folder / "traces" / (row["workload"].replace("+", "_") + ".sqlite")
        if not row.get("eager_ms") or not (trace.exists() or row.get("summary")):
            print(f"{row['workload']}: skipped ({'no tune result' if not row.get('eager_ms') else 'no trace'})",
                  file=sys.stderr)
            continue
        # the trace when it came back, else the summary the profile printed (same analyser)
        summary = analyse(open_trace(trace)).main.summary if trace.exists() else row["summary"]
        out = dataset_row({key: row[key] for key in ("workload", "family", "shape", "optimizer")}, summary,
                          row.get("record") or {}, row["eager_ms"], row.get("scopes") or {})
        fill_param_tensors(out)
        fill_capturable_params(out)
        fill_syncs_after_backward(out)
        fill_syncs_in_model(out)
        yield out


def dataset_row(identity: dict, summary, record: dict, eager_ms: float, measured: dict) -> dict:
    """One row of COLUMNS: ``identity`` (workload, family, shape, optimizer), the GPU and the
    features of the profile's summary and run record, tune's eager time and, per scope,
    ``measured[scope]`` ({"ms", "status"}; a scope absent is "not measured")."""
    out = {**identity, "gpu": (record.get("calibration") or {}).get("gpu", ""), **features_of(summary, record),
           "eager_ms": eager_ms}
    for scope in SCOPES:
        timing = measured.get(scope) or {}
        out[f"{scope}_ms"] = timing.get("ms") or ""
        out[f"{scope}_status"] = timing.get("status", "not measured")
    return out


def write_dataset(path: Path, rows) -> None:
    """The rows as CSV, in COLUMNS' order; a NaN feature (not measured) as an empty cell."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if isinstance(v, float) and v != v else v) for k, v in row.items()})


def fill_param_tensors(row: dict) -> None:
    """The zoo model's trained parameter tensors where the row has no count from its record."""
    try:
        known = float(row.get("param_tensors") or "nan") > 0
    except ValueError:
        known = False
    if not known:
        model = zoo_model(row["workload"])
        if model is not None:   # None: a Hugging Face model, no zoo model to count on
            row["param_tensors"] = count_trained_parameters(model)


def zoo_model(workload: str):
    """The zoo model of a workload (``NAME`` or ``NAME+shape``), built on the meta device, or
    None for one the zoo does not hold."""
    name = workload.split("+")[0]
    if name not in ZOO:
        return None
    import torch

    with torch.device("meta"):
        return ZOO[name].build()


def fill_capturable_params(row: dict) -> None:
    """Where the record did not describe the optimizers (collected before the bootstrap did):
    the parameter tensors and elements a full-iteration graph makes capturable, from the row's
    optimizer (every zoo and Hugging Face script builds its AdamW or SGD without capturable or
    fused: AdamW's are all made capturable, SGD has no such flag); the elements counted over
    the zoo model built on the meta device (none for a Hugging Face model: left empty)."""
    if str(row.get("capturable_params", "")).strip() not in ("", "nan"):
        return
    optimizer = (row.get("optimizer") or "").lower()
    if optimizer not in ("adamw", "sgd") or not str(row.get("param_tensors", "")).strip():
        return
    adamw = optimizer == "adamw"
    row["capturable_params"] = row["param_tensors"] if adamw else 0.0
    model = zoo_model(row["workload"]) if adamw else None
    if not adamw:
        row["capturable_elements"] = 0.0
    elif model is not None:
        row["capturable_elements"] = float(sum(p.numel() for p in model.parameters() if p.requires_grad))


ZOO_SCRIPTS = ROOT / "bench" / "workloads" / "zoo_scripts"


def fill_syncs_after_backward(row: dict, script: Path | None = None) -> None:
    """Where the summary predates the count of syncs after the backward (collected before the
    analyser counted them, export not kept): 1 where discovery finds a GradScaler in the row's
    script, ``script`` or the zoo script of its shape (``zoo_amp.py`` for ``+amp``), 0 where it
    finds none. The scaler's inf check is the sync there: in zoo_amp.py's export
    (sample_traces/zoo_cnn_amp_profiled.sqlite) it is the loop's one sync, after the backward.
    Left empty without a script."""
    if str(row.get("syncs_after_backward", "")).strip() not in ("", "nan"):
        return
    script = script or ZOO_SCRIPTS / f"zoo_{row.get('shape') or 'plain'}.py"
    if script.is_file():
        from tuner.discover import discover

        row["syncs_after_backward"] = float(bool(discover(script).scaler))


def fill_compile_eager(row: dict, script: Path) -> None:
    """Where the row predates the run record's note of what compile runs eagerly (a sparse
    operation, an RNN module): today's patch on the row's script says it (static, nothing
    runs); left empty where patch refuses compile or the script is not at hand."""
    if str(row.get("compile_eager", "")).strip() not in ("", "nan") or not script.is_file():
        return
    patch = _patched(script, "compile")
    if patch is not None:
        row["compile_eager"] = float(bool(patch.compile_eager))


def fill_helper_inputs(row: dict, script: Path) -> None:
    """Where the row predates the run record's count of the names patch hands the full-iteration
    helper: today's patch on the row's script counts them (static, nothing runs); left empty
    where patch refuses full_iteration or the script is not at hand."""
    if str(row.get("helper_inputs", "")).strip() not in ("", "nan") or not script.is_file():
        return
    patch = _patched(script, "full_iteration")
    if patch is not None and patch.helper_inputs is not None:
        row["helper_inputs"] = float(patch.helper_inputs)


@functools.lru_cache(maxsize=None)
def _patched(script: Path, scope: str):
    """Today's patch of ``script`` for ``scope``, None where patch refuses it."""
    from tuner.patch import make_patch

    try:
        return make_patch(script, scope)
    except Exception:  # noqa: BLE001 - patch's refusal: nothing to read from it
        return None


def fill_syncs_in_model(row: dict) -> None:
    """Where the summary predates the count of syncs inside the forward and backward calls:
    every sync of a Hugging Face row (zoo_hf.py's models read a mask on the host in their
    forward: one ``cudaStreamSynchronize`` a step under the forward range in each of its four
    H100 exports of 2026-11-25, ``sample_traces/zoo_hf_bert_profiled.sqlite`` among them), none
    of any other zoo row (zoo_amp.py's one sync is its GradScaler's, after the backward)."""
    if str(row.get("syncs_in_model", "")).strip() not in ("", "nan"):
        return
    if row.get("shape") in ("plain", "loader", "amp", "hf"):
        row["syncs_in_model"] = row.get("syncs", 0.0) if row["shape"] == "hf" else 0.0


def kept_rows(path: Path):
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            fill_param_tensors(row)
            fill_capturable_params(row)
            fill_syncs_after_backward(row)
            fill_syncs_in_model(row)
            yield row


def carried_over(old: dict, new: dict) -> dict:
    """The new collection of a workload, with each scope it did not measure (``not measured``)
    taken from the old row: its measured speedup (old eager over the old scope's time) set
    against the new eager time, so that a collection of two scopes does not drop a third
    measured before (compile, a slower tune, was left out of some)."""
    out = dict(new)
    for scope in SCOPES:
        if new.get(f"{scope}_status") != "not measured" or old.get(f"{scope}_status") in (None, "", "not measured"):
            continue
        try:
            speedup = float(old["eager_ms"]) / float(old[f"{scope}_ms"])
            out[f"{scope}_ms"] = float(new["eager_ms"]) / speedup
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        out[f"{scope}_status"] = old[f"{scope}_status"]
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--keep", type=Path, help="an earlier dataset CSV whose rows come first, as they are")
    parser.add_argument("--update", type=Path, help="an earlier dataset CSV whose rows stay in their order, each "
                        "replaced by a new collection of the same workload where the folders hold one")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args()
    if args.keep and args.update:
        parser.error("--keep and --update: one earlier dataset at a time")
    rows, seen = [], set()
    collected = [row for folder in args.folders for row in rows_of(folder)]
    if args.update:   # the newer measurement of a workload wins, in the old row's place
        newer = {}
        for row in collected:
            newer.setdefault(row["workload"], row)
        collected = [carried_over(row, newer.pop(row["workload"])) if row["workload"] in newer else row
                     for row in kept_rows(args.update)] + list(newer.values())
    sources = [kept_rows(args.keep)] if args.keep else []
    for source in sources + [collected]:   # collected twice: the first one's
        for row in source:
            if row["workload"] not in seen:
                seen.add(row["workload"])
                rows.append(row)
    write_dataset(args.output, rows)
    print(f"{args.output}: {len(rows)} workloads", file=sys.stderr)


if __name__ == "__main__":
    main()
