"""How much GPU time a full-iteration graph's capturable optimizer step adds, measured on the GPU
instead of fitted (#12): the model charged it as a line fitted on the H100 dataset's AdamW
rows (0.0063 ms per parameter tensor, none per optimizer), which read the small steps of the
corpus loops (4-17 tensors) and the large ones (26-41) alike wrong.

On the GPU (the calibration's own measurement, ``advisor.calibrate.step_extra_us``, for every
optimizer that the committed run records of the sets timed as tune times now saw made
capturable: class, tensors, elements)::

    python bench/capturable_probe.py measure OUT.json

On the CPU, with that file: each row of those sets given the measured cost its calibration
would have carried (``advisor.predict.measured_capturable_ms``), and the predictions against
tune's paired measurements, beside the fitted cost::

    python bench/capturable_probe.py compare OUT.json [OUT2.json ...] [--any-gpu]

A file measured on one GPU serves the rows profiled on that GPU (with ``--any-gpu``, every
row); ``compare`` says which rows it had no measurement for (they keep the fitted cost).
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from advisor import predict as pr  # noqa: E402
from advisor import runrecord  # noqa: E402
from advisor.calibrate import summed_extra_us  # noqa: E402
from unseen_eval import median_hits  # noqa: E402

SCOPES = ("full_iteration", "fwd_bwd")


def now_sets():
    """(GPU label, dataset rows path, tune folder, set folder, the measurements counted:
    unseen_eval.now_keep) of each set timed as tune times now, per scope once."""
    import unseen_eval as ue

    seen = set()
    for _, rows, results, _, _ in ue.SETS:
        for prefixes, gpu in ((ue.NOW, "H100"), (ue.NOW_H200, "H200")):
            if rows.startswith(prefixes) and rows not in seen:
                seen.add(rows)
                yield gpu, ue.RESULTS / rows, ue.RESULTS / results, (ue.RESULTS / rows).parent, ue.now_keep(rows)


def record_of(folder: Path, row: dict):
    """The run record ``row`` was built from (``baseline_stretches.record_of``), read; None without one."""
    from baseline_stretches import record_of as path_of

    path = path_of(folder, row)
    return json.loads(path.read_text()) if path else None


def specs_in_records() -> list:
    """Every distinct CLASS:TENSORS:ELEMENTS:GROUPS in the sets' run records."""
    specs = set()
    for _, rows, _, folder, _ in now_sets():
        for row in pr.read_dataset(rows):
            record = record_of(folder, row)
            if record:
                specs.update(runrecord.capturable_specs(record.get("bootstrap")))
    return sorted(specs)


def measure(out: Path) -> None:
    import torch

    from advisor import calibrate

    device = torch.device("cuda", torch.cuda.current_device())
    found = {"gpu": torch.cuda.get_device_name(device), "torch": torch.__version__, "steps": [], "failed": []}
    for spec in specs_in_records():
        name, tensors, elements, groups = calibrate.optimizer_spec(spec)
        try:
            found["steps"].append(calibrate.step_extra_us(torch, device, name, tensors, elements, groups))
        except Exception as error:  # noqa: BLE001 - recorded, the others go on
            found["failed"].append({"spec": spec, "error": f"{type(error).__name__}: {error}"[:300]})
        print(json.dumps(found["steps"][-1] if found["steps"] else found["failed"][-1]), file=sys.stderr)
    out.write_text(json.dumps(found, indent=1) + "\n")


def with_measured(row: dict, record: dict, probes: list, any_gpu: bool = False):
    """``row`` with the capturable step's cost a calibration on the probe's GPU would have
    recorded, or None where no probe of the row's GPU holds every optimizer it made capturable."""
    bootstrap = (record or {}).get("bootstrap") or {}
    specs = runrecord.capturable_specs(bootstrap)
    for probe in probes:
        if probe["gpu"] != row.get("gpu") and not any_gpu:
            continue
        table = {f"{s['class']}:{s['tensors']}:{s['elements']}:{s.get('groups', 1)}": s for s in probe["steps"]}
        if not specs or not all(spec in table for spec in specs):
            continue
        steps = [table[spec] for spec in specs]
        calibration = {"capturable_steps": steps, "capturable_step_us": summed_extra_us(steps)}
        made = bootstrap.get("made_capturable") or {}
        return {**row, "capturable_step_ms": pr.measured_capturable_ms(calibration, made)}
    return None


def compare_all(probes: list, model: dict, any_gpu: bool = False) -> dict:
    """Per GPU and scope: hits of the fitted cost and of the measured one, on the rows the
    probes cover, and the rows they do not."""
    from paired_vs_predicted import compare

    out = {}
    for gpu, rows_path, tune, folder, keep in now_sets():
        rows = pr.read_dataset(rows_path)
        fitted = [{**row, "capturable_step_ms": ""} for row in rows]
        measured, missing = [], []
        for row in rows:
            # nothing made capturable, or its own calibration measured it: the row as it is
            kept = not pr._value(row, "capturable_params", 0.0) > 0 or pr._value(row, "capturable_step_ms") >= 0
            filled = row if kept else with_measured(row, record_of(folder, row), probes, any_gpu)
            measured.append(filled or row)
            if filled is None:
                missing.append(row["workload"])
        for scope in SCOPES:
            key = f"{gpu} {scope}"
            entry = out.setdefault(key, {"fitted": [0, 0], "measured": [0, 0], "unmeasured": [],
                                         "fitted_graphed": [], "measured_graphed": [],
                                         "fitted_scripts": [], "measured_scripts": []})
            for kind, these in (("fitted", fitted), ("measured", measured)):
                found = compare(these, tune, scope, model, keep=keep)
                entry[kind][0] += found["paired"][0]
                entry[kind][1] += found["paired"][1]
                entry[f"{kind}_scripts"] += [(name, p, paired) for name, p, paired, _ in found["scripts"] if paired]
                # tune's graphed time over the predicted, each script: where the GPU side errs
                entry[f"{kind}_graphed"] += [got / predicted for _, _, _, predicted, got in found["sides"]]
            if scope == SCOPES[0]:
                entry["unmeasured"] += missing
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="on the GPU: every optimizer of the committed records")
    m.add_argument("out", type=Path)
    c = sub.add_parser("compare", help="on the CPU: predictions with the measured cost against the fitted")
    c.add_argument("probes", type=Path, nargs="+")
    c.add_argument("--model", type=Path, help="benefit model JSON (default: the shipped one)")
    c.add_argument("--any-gpu", action="store_true", help="a probe serves rows of another GPU too")
    args = parser.parse_args()
    if args.command == "measure":
        measure(args.out)
        return
    probes = [json.loads(p.read_text()) for p in args.probes]
    for key, entry in compare_all(probes, pr.load_model(args.model), args.any_gpu).items():
        (fh, ft), (mh, mt) = entry["fitted"], entry["measured"]
        print(f"{key:22s} fitted cost {fh:3d} of {ft:3d} (graphed time measured/predicted, median "
              f"{statistics.median(entry['fitted_graphed']):.3f})   measured cost {mh:3d} of {mt:3d} "
              f"({statistics.median(entry['measured_graphed']):.3f}); per loop "
              + " and ".join("{} of {}".format(*median_hits(entry[f"{kind}_scripts"])) for kind in ("fitted", "measured"))
              + (f"   (no probe: {', '.join(sorted(set(entry['unmeasured'])))})" if entry["unmeasured"] else ""))


if __name__ == "__main__":
    main()
