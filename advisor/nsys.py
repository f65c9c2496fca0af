"""Finding Nsight Systems and turning a ``.nsys-rep`` into the SQLite export we read."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import CgAdviseError

# Where installers put nsys: its own packages, the CUDA toolkit, and the copy in Nsight Compute.
SEARCH_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-*/bin/nsys",
    "/usr/local/cuda*/bin/nsys",
    "/usr/local/cuda*/nsight-systems-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/usr/local/cuda*/nsight-compute-*/host/target-linux-x64/nsys",
)
HOW_TO_GET = ("install Nsight Systems (https://developer.nvidia.com/nsight-systems, or the "
              "`nsight-systems` package of the CUDA apt repository), or pass --nsys PATH / set $NSYS")
MIN_VERSION = (2022, 1)   # first release whose export carries the tables we read


class NsysError(CgAdviseError):
    """nsys missing, too old, or failing."""

    exit_code = 3


@dataclass
class Nsys:
    path: str
    version: str

    @property
    def version_tuple(self) -> tuple:
        return tuple(int(part) for part in re.findall(r"\d+", self.version)[:2])


def parse_version(text: str) -> str:
    match = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", text)
    return match.group(1) if match else "unknown"


def candidates(explicit: str | None = None, environ=os.environ) -> list:
    """Every nsys worth trying, best first: --nsys, $NSYS, PATH, then the usual folders."""
    found = []
    if explicit:
        return [explicit]
    if environ.get("NSYS"):
        return [environ["NSYS"]]
    on_path = shutil.which("nsys")
    if on_path:
        found.append(on_path)
    for pattern in SEARCH_GLOBS:
        # newest release first: its folder names carry the version
        found.extend(sorted(glob.glob(pattern), key=_version_key, reverse=True))
    return found


def _version_key(path: str) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def find_nsys(explicit: str | None = None, environ=os.environ) -> Nsys:
    for path in candidates(explicit, environ):
        if os.path.isfile(path) and os.access(path, os.X_OK):
            nsys = Nsys(path, version_of(path))
            if nsys.version_tuple and nsys.version_tuple < MIN_VERSION:
                raise NsysError(f"nsys {nsys.version} at {path} is too old (need 2022.1 or newer): {HOW_TO_GET}")
            return nsys
        if explicit or environ.get("NSYS"):
            raise NsysError(f"nsys not found at {path}: {HOW_TO_GET}")
    raise NsysError(f"Nsight Systems (nsys) not found on PATH or in /opt/nvidia, /usr/local/cuda*: {HOW_TO_GET}")


def version_of(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise NsysError(f"{path} --version failed: {error}") from None
    return parse_version(out.stdout + out.stderr)


def export_command(nsys: Nsys, report: Path, sqlite: Path) -> list:
    return [nsys.path, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(report)]


def export_sqlite(nsys: Nsys, report: Path, sqlite: Path) -> Path:
    result = subprocess.run(export_command(nsys, report, sqlite), capture_output=True, text=True)
    if result.returncode != 0 or not sqlite.exists():
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no message"]
        raise NsysError(f"nsys export of {report} failed: {tail[0]}")
    return sqlite


def sqlite_for(report: Path, nsys_path: str | None = None, reexport: bool = False) -> Path:
    """The SQLite export of a report: the file itself, an up-to-date export beside a
    ``.nsys-rep``, or a fresh export (an older one is kept as ``.sqlite.bak`` with reexport)."""
    report = Path(report)
    if report.suffix != ".nsys-rep":
        return report
    if not report.exists():
        raise CgAdviseError(f"{report}: no such file")
    sqlite = report.with_suffix(".sqlite")
    replacing = sqlite.exists()
    if replacing:
        if sqlite.stat().st_mtime >= report.stat().st_mtime and not reexport:
            return sqlite
        if not reexport:
            raise CgAdviseError(f"{sqlite} is older than {report.name}: pass --reexport to export again "
                                f"(the old file is kept as {sqlite.name}.bak)")
    folder = report.resolve().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise CgAdviseError(f"{folder}: not writable, so {report.name} cannot be exported beside it: copy the "
                            f"report to a writable folder, or export it with `nsys export --type sqlite -o "
                            f"OTHER.sqlite {report.name}` and pass that file")
    try:
        nsys = find_nsys(nsys_path)
    except NsysError as error:
        raise NsysError(f"cannot read {report.name} without nsys ({error}); or export it elsewhere with "
                        f"`nsys export --type sqlite {report.name}` and pass the .sqlite") from None
    if not replacing:
        return export_sqlite(nsys, report, sqlite)
    # the old export stays in place until the new one exists: a failed export loses nothing
    fresh = export_sqlite(nsys, report, sqlite.with_name(f".{sqlite.stem}.cg-advise-new.sqlite"))
    sqlite.replace(sqlite.with_name(sqlite.name + ".bak"))
    fresh.replace(sqlite)
    return sqlite
