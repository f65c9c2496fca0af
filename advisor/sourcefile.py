"""The user's files, read and written back the way they were: a script decoded as Python
decodes it (PEP 263 coding line, UTF-8 BOM), its line endings and mode bits kept, and every
write all or nothing (a temporary file in the same folder, then an atomic replace), so an
interrupted or refused write never leaves a half-written script or a stray backup."""

from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

from .errors import CgAdviseError

MAX_SCRIPT_BYTES = 8 * 1024 * 1024   # larger than any training script; libcst would take minutes
BOM = "\ufeff"


@dataclass(frozen=True)
class SourceFile:
    """A script's text (line endings as in the file, no BOM) and how to write it back."""

    path: Path
    text: str
    encoding: str       # the codec Python used, e.g. "utf-8" or "iso-8859-1"
    bom: bool           # the file starts with a UTF-8 byte-order mark
    raw: bytes          # the bytes as read: a backup is these, byte for byte

    def encode(self, text: str) -> bytes:
        """``text`` in the file's own encoding (and BOM); one clear line if it cannot be."""
        try:
            data = text.encode(self.encoding)
        except UnicodeEncodeError as error:
            raise CgAdviseError(f"{self.path}: the rewrite holds a character that {self.encoding} cannot encode "
                                f"({text[error.start:error.end]!r})") from None
        return (BOM.encode("utf-8") if self.bom else b"") + data

    def diff_text(self, text: str) -> str:
        """``text`` as a diff line sees it: the BOM is part of the first line's bytes."""
        return (BOM if self.bom else "") + text


def read_source(path) -> SourceFile:
    """The script at ``path``, decoded as the interpreter would; bad input is one line."""
    path = Path(path)
    if path.is_dir():
        raise CgAdviseError(f"{path}: is a folder, not a Python script")
    try:
        size = path.stat().st_size
        if size > MAX_SCRIPT_BYTES:
            raise CgAdviseError(f"{path}: {size / 2**20:.0f} MiB is too large for a training script "
                                f"(the limit is {MAX_SCRIPT_BYTES // 2**20} MiB)")
        raw = path.read_bytes()
    except OSError as error:
        raise CgAdviseError(f"{path}: {error.strerror or error}") from None
    if b"\0" in raw:
        raise CgAdviseError(f"{path}: a binary file (it holds NUL bytes), not a Python script")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as error:   # what Python itself would refuse the file with
        why = str(error.msg if getattr(error, "msg", None) else error)
        if "invalid or missing encoding declaration" in why:
            why = "not valid utf-8, and no '# -*- coding: NAME -*-' line names another encoding (Python refuses it too)"
        raise CgAdviseError(f"{path}: {why}") from None
    bom = encoding == "utf-8-sig"
    codec = "utf-8" if bom else encoding
    try:
        text = raw[3:].decode(codec) if bom else raw.decode(codec)
    except UnicodeDecodeError as error:
        raise CgAdviseError(f"{path}: not valid {codec} at byte {error.start} (declare the file's encoding with a "
                            "'# -*- coding: NAME -*-' line, as Python requires)") from None
    return SourceFile(path, text, codec, bom, raw)


def writable(path: Path) -> None:
    """Refuses, with one line, a file that must not be replaced: read-only by its mode bits
    (root may write any file, but a 0444 file says "leave me alone"), or in a folder we cannot
    write a temporary file into."""
    try:
        mode = path.stat().st_mode
    except OSError as error:
        raise CgAdviseError(f"{path}: {error.strerror or error}") from None
    if not stat.S_ISREG(mode):
        raise CgAdviseError(f"{path}: not a regular file")
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise CgAdviseError(f"{path}: read-only; make it writable (chmod u+w) to apply the change")
    folder = path.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CgAdviseError(f"{folder}: the folder is not writable")


def atomic_write(path, data: bytes, mode=None, exclusive: bool = False) -> None:
    """Writes ``data`` to ``path`` through a temporary file in the same folder, then one
    atomic rename: the file is either the old one or the new one, never half of each.
    ``mode`` sets the permission bits (default: the existing file's, else 0644 less umask);
    ``exclusive`` refuses to replace an existing file (a backup is never overwritten)."""
    path = Path(path)
    existing = path.stat() if path.exists() else None
    if mode is None:
        mode = stat.S_IMODE(existing.st_mode) if existing else _default_mode()
    try:
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    except OSError as error:
        raise CgAdviseError(f"{path.parent}: cannot write there ({error.strerror or error})") from None
    temporary = Path(handle.name)
    try:
        with handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        if existing and hasattr(os, "geteuid") and os.geteuid() == 0:
            os.chown(temporary, existing.st_uid, existing.st_gid)   # root keeps the file its owner's
        if exclusive:
            _link_new(temporary, path)
        else:
            os.replace(temporary, path)
    except FileExistsError:
        temporary.unlink(missing_ok=True)
        raise CgAdviseError(f"{path} exists: move it away first") from None
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise CgAdviseError(f"{path}: cannot write it ({error.strerror or error})") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _link_new(temporary: Path, path: Path) -> None:
    """Moves ``temporary`` to ``path`` only if no file is there (a hard link fails on an
    existing name, so no other writer can slip in between the check and the move)."""
    try:
        os.link(temporary, path)
    except FileExistsError:
        raise
    except OSError:               # a file system without hard links: check, then rename
        if path.exists():
            raise FileExistsError(path) from None
        os.replace(temporary, path)
        return
    temporary.unlink()


def write_text(path, text: str, mode=None) -> None:
    """A JSON result or model file, written whole or not at all."""
    atomic_write(path, text.encode("utf-8"), mode)


def _default_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
