"""Rewrites the golden files from the current code: discovery expectations, patch outputs,
refusals. Run it after an intended change, then read `git diff tests/` before committing.

    python tests/regenerate_goldens.py
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from advisor.errors import CgAdviseError  # noqa: E402
from tuner.discover import discover  # noqa: E402
from tuner.patch import PATCH_SCOPES, make_patch  # noqa: E402

CORPUS, GOLDEN = ROOT / "tests" / "corpus", ROOT / "tests" / "patch_golden"


def main():
    expected, refusals = {}, {}
    for old in GOLDEN.glob("*.out.py"):
        old.unlink()
    for source in sorted(CORPUS.glob("*.py")):
        relative = source.relative_to(ROOT)
        try:
            spec = discover(relative).to_dict()
            spec.pop("path")
            expected[source.name] = spec
        except CgAdviseError as error:
            expected[source.name] = {"error": str(error).split(": ", 1)[1]}
        for scope in PATCH_SCOPES:
            key = f"{source.stem}.{scope}"
            try:
                patched = make_patch(relative, scope).patched
            except CgAdviseError as error:
                refusals[key] = str(error).replace(str(relative), "{path}")
                continue
            (GOLDEN / f"{key}.out.py").write_text(patched)
    (CORPUS / "discover.expected.json").write_text(json.dumps(expected, indent=1))
    (GOLDEN / "refusals.json").write_text(json.dumps(refusals, indent=1))
    print(f"{len(expected)} scripts, {len(list(GOLDEN.glob('*.out.py')))} rewrites, {len(refusals)} refusals")


if __name__ == "__main__":
    main()
