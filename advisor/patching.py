"""The patch step between the CLI and tuner.patch: which scope, whether the file changed
since tuning, and writing with a backup."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

from .errors import CgAdviseError
from .sourcefile import atomic_write, writable


def tune_result_path(script: Path) -> Path:
    return script.with_name(script.name + ".cg-advise.json")


def file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise CgAdviseError(f"{path}: {error.strerror or error}") from None


def read_tune_result(script: Path) -> dict:
    """The saved tune result beside ``script``; a damaged one is one clear line."""
    saved = tune_result_path(script)
    try:
        result = json.loads(saved.read_text(encoding="utf-8"))
    except OSError as error:
        raise CgAdviseError(f"{saved}: {error.strerror or error}") from None
    except ValueError:
        raise CgAdviseError(f"{saved}: not a cg-advise tune result (damaged JSON): tune again or pass --scope") from None
    if not isinstance(result, dict) or not isinstance(result.get("winner", ""), str):
        raise CgAdviseError(f"{saved}: not a cg-advise tune result: tune again or pass --scope")
    return result


def chosen_scope(script: Path, scope, step=None):
    """(scope, step): the forced scope, else the saved tune result's winner (refused if the
    file changed), with the function the tuned loop was named in (``--step``)."""
    if scope:
        return scope, step
    saved = tune_result_path(script)
    if not saved.exists():
        raise CgAdviseError(f"no tune result beside {script} ({saved.name}): run `cg-advise tune {script}` "
                            "or pass --scope")
    result = read_tune_result(script)
    if result.get("sha256") != file_digest(script):
        raise CgAdviseError(f"{script} changed since it was tuned ({saved.name}): tune again or pass --scope")
    if result.get("winner") in (None, "eager"):
        raise CgAdviseError(f"the tune result says eager is fastest for {script}: nothing to patch")
    recorded = result.get("step") if isinstance(result.get("step"), dict) else {}
    return result["winner"], step or recorded.get("step_name")


def run_patch(script, scope, apply_: bool, step=None):
    """(diff bytes, note): the diff to print, or, with ``apply_``, the file rewritten and its
    original kept byte for byte as ``SCRIPT.orig``; nothing is written unless all of it can be."""
    from tuner.patch import make_patch

    path = Path(script)
    if path.is_dir():
        raise CgAdviseError(f"{path}: is a folder, not a Python script")
    if not path.exists():
        raise CgAdviseError(f"{path}: no such file")
    backup = path.with_name(path.name + ".orig")
    if apply_:
        if backup.exists() or backup.is_symlink():
            raise CgAdviseError(f"{backup} exists (an earlier patch's backup): move it away first")
        writable(path)
    scope, step = chosen_scope(path, scope, step)
    patch = make_patch(path, scope, step=step)
    relpath = os.path.relpath(path)
    if not apply_:
        named = f" --step {step}" if step else ""
        return patch.diff_bytes(relpath), (f"{relpath}: scope {scope}; apply with "
                                           f"`cg-advise patch {relpath} --scope {scope}{named} --apply`")
    if file_digest(path) != hashlib.sha256(patch.source.raw).hexdigest():
        raise CgAdviseError(f"{path} changed while it was being patched: nothing written, run again")
    target = path.resolve()   # a symlinked script: write the file it points to, keep the link
    mode = stat.S_IMODE(target.stat().st_mode)
    atomic_write(backup, patch.source.raw, mode, exclusive=True)
    try:
        atomic_write(target, patch.patched_bytes, mode)
    except BaseException:
        backup.unlink(missing_ok=True)
        raise
    return b"", f"patched {relpath} with scope {scope}; the original is {backup.name}"
