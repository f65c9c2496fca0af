"""bench/tune_repeatability.py: the ceiling of "within 20 %" set by tune's own repeatability,
counted from the committed tune results by a plain reading of the files here."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT, bench_module


@pytest.fixture(scope="module")
def repeat():
    return bench_module("tune_repeatability")


def paired(folder, scope):
    """{loop: tune's row of ``scope``} read by hand: a loop's own result file first."""
    out = {}
    for path in sorted(folder.iterdir(), key=lambda p: not p.name.endswith(".py.cg-advise.json")):
        loop = path.name.split(".")[0]
        if loop in out or not path.name.endswith((".tune.json", ".py.cg-advise.json")):
            continue
        for row in json.loads(path.read_text())["rows"]:
            if row["scope"] == scope and row["status"] == "ok" and row.get("paired_speedup"):
                out[loop] = row
    return out


def test_two_tunes_of_one_loop_counted_from_the_files(repeat):
    """The sixteen loops tuned again on 2026-11-28 against their earlier tunes (the distillation
    loop twice more: 18 pairs), each speedup taken as the prediction of the other: full_iteration
    within 20 % for 27 of 36, fwd_bwd for 36 of 36; with the six loops tuned again after their
    calibration measured the capturable step (26 pairs, 20 loops), 42 of 52 and 52 of 52."""
    folders = repeat.default_folders()
    assert len(folders) == 11
    pairs = repeat.between_runs(repeat.read_runs(folders))
    for scope, hits in (("full_iteration", 42), ("fwd_bwd", 52)):
        runs = [{k: r["paired_speedup"] for k, r in paired(f, scope).items()} for f in folders]
        expected = []
        for i, a in enumerate(runs):
            for b in runs[i + 1:]:
                expected += [(a[k], b[k]) for k in sorted(set(a) & set(b))]
        assert sorted((x, y) for *_, x, y in pairs[scope]) == sorted(expected)
        assert len(expected) == 26 and len({loop for loop, *_ in pairs[scope]}) == 20
        assert sum((abs(x - y) <= 0.2 * y) + (abs(y - x) <= 0.2 * x) for x, y in expected) == hits
        assert sum(repeat.as_predictions(x, y) for x, y in expected) == hits


def test_within_one_run_the_two_processes_eager_times(repeat):
    """Each tune run's full_iteration process against its fwd_bwd process, seconds apart on one
    host: their eager times within 20 % of each other for 38 of 54 runs, 43 of 60 with the six
    runs of 2026-11-28 whose calibration measured the capturable step."""
    ratios = []
    for folder in repeat.default_folders():
        full, fwd = paired(folder, "full_iteration"), paired(folder, "fwd_bwd")
        ratios += [full[k]["paired_eager_ms"] / fwd[k]["paired_eager_ms"] for k in sorted(set(full) & set(fwd))]
    found = [r for loops in repeat.read_runs(repeat.default_folders()).values() for _, r in repeat.within_run(loops)]
    assert sorted(found) == sorted(ratios) and len(ratios) == 60
    assert repeat.within_run_hits(found) == sum(abs(r - 1) <= 0.2 for r in ratios) == 43


def run(*args):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "tune_repeatability.py"), *map(str, args)],
                            capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


def test_bad_folders_are_one_line_and_exit_1(tmp_path):
    assert run(tmp_path / "nope") == (1, "", f"tune_repeatability: no such folder: {tmp_path / 'nope'}\n")
    assert run(tmp_path) == (1, "", f"tune_repeatability: no tune results in: {tmp_path}\n")
    (tmp_path / "a.tune.json").write_text("{not json")
    code, out, err = run(tmp_path)
    assert code == 1 and out == "" and err.startswith(f"tune_repeatability: not a tune result in {tmp_path}: ")
    assert err.count("\n") == 1


def test_a_folder_named_twice_is_read_once(repeat):
    folder = repeat.default_folders()[0]
    code, out, _ = run(folder, folder)
    assert code == 0 and "0 of 0 (0 pairs" in out
