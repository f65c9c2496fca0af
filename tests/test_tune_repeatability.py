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


def speedups(folder, scope):
    out = {}
    for path in folder.iterdir():
        if path.name.endswith((".tune.json", ".py.cg-advise.json")):
            for row in json.loads(path.read_text())["rows"]:
                if row["scope"] == scope and row["status"] == "ok" and row.get("paired_speedup"):
                    out[path.name.split(".")[0]] = row["paired_speedup"]
    return out


def test_two_tunes_of_one_loop_counted_from_the_files(repeat):
    """The seventeen loops tuned again on 2026-11-28 against their earlier tunes (the distillation
    loop twice: 18 pairs), each speedup taken as the prediction of the other: full_iteration within
    20 % for 27 of 36, fwd_bwd for 36 of 36."""
    folders = repeat.default_folders()
    assert len(folders) == 9
    pairs = repeat.between_runs(folders)
    for scope, hits in (("full_iteration", 27), ("fwd_bwd", 36)):
        runs = [speedups(f, scope) for f in folders]
        expected = []
        for i, a in enumerate(runs):
            for b in runs[i + 1:]:
                expected += [(a[k], b[k]) for k in sorted(set(a) & set(b))]
        assert sorted((x, y) for *_, x, y in pairs[scope]) == sorted(expected)
        assert len(expected) == 18
        assert sum((abs(x - y) <= 0.2 * y) + (abs(y - x) <= 0.2 * x) for x, y in expected) == hits
        assert sum(repeat.as_predictions(x, y) for x, y in expected) == hits


def test_a_missing_folder_is_one_line_and_exit_1(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "tune_repeatability.py"), str(tmp_path / "nope")],
                            capture_output=True, text=True)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr == f"tune_repeatability: no such folder: {tmp_path / 'nope'}\n"
