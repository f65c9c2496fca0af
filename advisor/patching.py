"""The patch step between the CLI and tuner.patch: which scope, whether the file changed
since tuning, and writing with a backup."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .errors import CgAdviseError


def tune_result_path(script: Path) -> Path:
    return script.with_name(script.name + ".cg-advise.json")


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def chosen_scope(script: Path, scope, step=None):
    """(scope, step): the forced scope, else the saved tune result's winner (refused if the
    file changed), with the function the tuned loop was named in (``--step``)."""
    if scope:
        return scope, step
    saved = tune_result_path(script)
    if not saved.exists():
        raise CgAdviseError(f"no tune result beside {script} ({saved.name}): run `cg-advise tune {script}` "
                            "or pass --scope")
    result = json.loads(saved.read_text())
    if result.get("sha256") != file_digest(script):
        raise CgAdviseError(f"{script} changed since it was tuned ({saved.name}): tune again or pass --scope")
    if result.get("winner") in (None, "eager"):
        raise CgAdviseError(f"the tune result says eager is fastest for {script}: nothing to patch")
    return result["winner"], step or (result.get("step") or {}).get("step_name")


def run_patch(script, scope, apply_: bool, step=None):
    from tuner.patch import make_patch

    path = Path(script)
    if not path.exists():
        raise CgAdviseError(f"{path}: no such file")
    backup = path.with_name(path.name + ".orig")
    if apply_ and backup.exists():
        raise CgAdviseError(f"{backup} exists (an earlier patch's backup): move it away first")
    scope, step = chosen_scope(path, scope, step)
    patch = make_patch(path, scope, step=step)
    relpath = os.path.relpath(path)
    if not apply_:
        named = f" --step {step}" if step else ""
        return patch.diff(relpath), (f"{relpath}: scope {scope}; apply with "
                                     f"`cg-advise patch {relpath} --scope {scope}{named} --apply`")
    backup.write_text(patch.original)
    path.write_text(patch.patched)
    return "", f"patched {relpath} with scope {scope}; the original is {backup.name}"
