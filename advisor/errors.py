"""Errors that end a command with one clear line instead of a traceback."""

from pathlib import Path


class CgAdviseError(Exception):
    """Bad input or environment; ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class TraceError(CgAdviseError):
    """The report cannot be read or holds nothing to analyse."""


def file_head(path, folder_hint: str, error=CgAdviseError) -> bytes:
    """The first 16 bytes of a file the user named, which tell its format (SQLite's magic, JSON,
    gzip). Raises ``error`` with one line for a missing path or a folder; ``folder_hint``
    follows "is a folder" in that line, its own separator first (", not ...", "; give ...")."""
    path = Path(path)
    if not path.exists():
        raise error(f"{path}: no such file")
    if path.is_dir():
        raise error(f"{path}: is a folder{folder_hint}")
    with path.open("rb") as handle:
        return handle.read(16)
