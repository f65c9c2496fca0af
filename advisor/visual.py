"""Writing the HTML report and the Perfetto trace, for the CLI: which inputs, refusing to
replace a user's file without --force, the patch of a tune result's winner."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from .errors import CgAdviseError, file_head
from .sourcefile import atomic_write

TUNE_SCHEMA = "cg-advise.tune/1"
SIZE_NOTE_BYTES = 3_000_000


NO_PERFETTO_OF_CHROME_TRACE = ("--perfetto: a torch.profiler trace is already a Chrome trace: open it in Perfetto "
                               "as it is")


def is_chrome_trace(path) -> bool:
    """A torch.profiler trace rather than an Nsight Systems export or report, by the file's first
    bytes as open_trace tells them; a file that cannot be read is left to the reader's own error."""
    from .kineto import looks_like_json

    p = Path(path)
    if p.suffix == ".nsys-rep":
        return False
    try:
        return looks_like_json(p)
    except OSError:
        return False


def check_target(path, force: bool, option: str) -> Path:
    """An output file we may write: never a folder, never an existing file without --force;
    asked before any work, so a refusal costs nothing."""
    target = Path(path)
    if target.is_dir() or str(path).endswith(("/", "\\")):
        raise CgAdviseError(f"{option} {path}: is a folder; give the file's name")
    if (target.exists() or target.is_symlink()) and not force:
        raise CgAdviseError(f"{option} {target}: exists; pass --force to replace it")
    if not target.parent.exists() and str(target.parent):
        raise CgAdviseError(f"{option} {target}: no such folder {target.parent}")
    return target


def write_html(target: Path, analysis, trace, tune: Optional[dict] = None, diff: Optional[str] = None,
               source: str = "") -> int:
    """Writes the page; returns its size in bytes."""
    from .html_report import render_html
    from .timeline import build

    timeline = None
    if analysis is not None and analysis.main.iterations and _is_export(trace):
        timeline = build(trace, analysis.main)
    data = render_html(analysis, timeline, tune, diff, source).encode("utf-8")
    atomic_write(target, data)
    return len(data)


def write_perfetto(target: Path, analysis, trace, source: str = "") -> tuple:
    """Writes every analysed iteration (capped) as a Chrome trace; returns (bytes, events)."""
    from .perfetto import chrome_trace, to_json
    from .timeline import PERFETTO_MAX_EVENTS, build

    group = analysis.main
    if not _is_export(trace):
        raise CgAdviseError(NO_PERFETTO_OF_CHROME_TRACE)
    if not group.iterations:
        raise CgAdviseError("--perfetto: no GPU work in the analysed window: nothing to write")
    timeline = build(trace, group, range(len(group.iterations)), PERFETTO_MAX_EVENTS)
    data = to_json(chrome_trace(timeline, group, source)).encode("utf-8")
    atomic_write(target, data)
    return len(data), timeline.events


def _is_export(trace) -> bool:
    """The event-by-event timeline is read again from an Nsight Systems export with SQL; a
    torch.profiler trace has its own viewer (Perfetto opens it as it is)."""
    return getattr(trace, "backend", "nsys") == "nsys"


def read_tune_json(path) -> dict:
    """A tune result (``tune --json`` or the SCRIPT.cg-advise.json tune saves); one line if not."""
    try:
        result = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError:
        raise CgAdviseError(f"{path}: damaged JSON, not a cg-advise tune result") from None
    if not isinstance(result, dict) or result.get("schema") != TUNE_SCHEMA or not isinstance(result.get("rows"), list):
        raise CgAdviseError(f"{path}: not a cg-advise tune result (schema {TUNE_SCHEMA}, from `cg-advise tune --json` "
                            "or the SCRIPT.cg-advise.json it saves)")
    return result


def split_results(paths) -> tuple:
    """(the one profile export, the one tune result) among ``cg-advise report``'s inputs,
    told apart by their content: an SQLite file, a .nsys-rep or a torch.profiler trace is a
    profile, other JSON a tune result."""
    profile, tune = None, None
    for path in paths:
        p = Path(path)
        head = file_head(p, "; give a profile export (.sqlite, .nsys-rep) or a tune result (.json)")
        tune_json = None
        if not (head.startswith(b"SQLite format 3") or p.suffix in (".nsys-rep", ".sqlite", ".gz")):
            tune_json = _json_or_none(p)
        # a profile: an export, a report, or a torch.profiler trace (its JSON holds traceEvents)
        if tune_json is None or (isinstance(tune_json, dict) and "traceEvents" in tune_json):
            if profile is not None:
                raise CgAdviseError(f"{p}: a second profile ({profile} is the first): give one profile and one "
                                    "tune result at most")
            profile = str(p)
        else:
            if tune is not None:
                raise CgAdviseError(f"{p}: a second tune result: give one profile and one tune result at most")
            tune = (str(p), read_tune_json(p))
    return profile, tune


def _json_or_none(path: Path):
    """The file's JSON, or None when it is not JSON (then it is taken as a profile, whose reader
    says what is wrong with it)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None


def winner_diff(tune: dict, beside: Optional[Path] = None) -> Optional[str]:
    """The winner's patch as patch prints it, when its script is found (as recorded, or
    beside the result file) unchanged since tuning; else None."""
    winner = tune.get("winner")
    if not winner or winner == "eager" or not tune.get("script"):
        return None
    recorded = Path(tune["script"])
    candidates = [recorded] + ([beside / recorded.name] if beside is not None else [])
    script = next((c for c in candidates if c.is_file()), None)
    if script is None:
        return None
    if tune.get("sha256") and hashlib.sha256(script.read_bytes()).hexdigest() != tune["sha256"]:
        return None
    from tuner.patch import make_patch

    step = (tune.get("step") or {}).get("step_name")
    patch = make_patch(script, winner, step=step)
    return patch.diff_bytes(os.path.relpath(script)).decode("utf-8", errors="replace")


def size_note(size: int) -> str:
    return f"{size / 1e6:.2f} MB" + (" (over 3 MB: a long window; the timeline is capped)" if size > SIZE_NOTE_BYTES
                                      else "")
