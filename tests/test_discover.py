"""Loop discovery on a corpus of training-script styles, against golden expectations."""

import json

import pytest

from conftest import ROOT
from tuner.discover import DiscoveryError, discover

CORPUS = ROOT / "tests" / "corpus"
EXPECTED = json.loads((CORPUS / "discover.expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus(name):
    expected = EXPECTED[name]
    if "error" in expected:
        with pytest.raises(DiscoveryError) as error:
            discover(CORPUS / name)
        assert str(error.value) == f"{CORPUS / name}: {expected['error']}"
        return
    found = discover(CORPUS / name).to_dict()
    assert found.pop("path") == str(CORPUS / name)
    assert found == expected


def test_corpus_covers_the_styles():
    specs = {name: e for name, e in EXPECTED.items() if "error" not in e}
    assert {s["loop_kind"] for s in specs.values()} == {"for", "while"}
    assert any(s["function"] for s in specs.values()) and any(s["function"] is None for s in specs.values())
    assert any(s["scaler"] and s["autocast"] and s["clip_grad"] for s in specs.values())
    assert any(s["scheduler"] for s in specs.values())
    assert any(o["code"] == "item" for s in specs.values() for o in s["outside"])


def test_innermost_training_loop_wins():
    spec = discover(CORPUS / "in_function.py")
    assert (spec.line, spec.end_line, spec.batch) == (9, 16, ["images", "targets"])


def test_not_python_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("for x in :\n    pass\n")
    with pytest.raises(DiscoveryError) as error:
        discover(bad)
    assert str(error.value).startswith(f"{bad}: not a Python script")
