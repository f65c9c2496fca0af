"""Every command against a table of bad inputs: one line on stderr, the documented exit code,
no traceback, and the user's files untouched (hashed before and after). Then the good but
unusual inputs that must work: a latin-1 script with its coding line, a BOM, CRLF endings,
an executable file, a symlink."""

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from advisor.patching import tune_result_path
from conftest import ROOT, cuda_available, sample

SCRIPT = ROOT / "tests" / "corpus" / "basic_for.py"
TRAIN_CPU = ROOT / "tests" / "scripts" / "train_cpu_steps.py"
DATASET = ROOT / "advisor" / "data" / "dataset_h100.csv"


def invoke(*args, env=None):
    result = CliRunner().invoke(cli, [str(a) for a in args], env=env)
    return result.exit_code, result.stdout, result.stderr, result.exception


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (links not followed) with its bytes' hash and mode."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[str(path)] = ("link", os.readlink(path))
        elif path.is_file():
            out[str(path)] = (hashlib.sha256(path.read_bytes()).hexdigest(), stat.S_IMODE(path.stat().st_mode))
    return out


def assert_one_line_error(code, out, err, exception, expected_code, contains=""):
    assert exception is None or isinstance(exception, SystemExit), repr(exception)
    assert "Traceback" not in err and "Traceback" not in out
    lines = err.splitlines()
    assert code == expected_code, err
    assert len(lines) == 1 and lines[0].startswith("cg-advise: error: "), err
    assert contains in lines[0], lines[0]


# -- the inputs ---------------------------------------------------------------------------
def _write(tmp: Path, name: str, data) -> Path:
    path = tmp / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _tune_result(tmp: Path, text: str) -> Path:
    script = _write(tmp, "train.py", SCRIPT.read_bytes())
    tune_result_path(script).write_text(text)
    return script


def _read_only(tmp: Path) -> Path:
    script = _write(tmp, "train.py", SCRIPT.read_bytes())
    script.chmod(0o444)
    return script


def _orig_exists(tmp: Path) -> Path:
    script = _write(tmp, "train.py", SCRIPT.read_bytes())
    _write(tmp, "train.py.orig", "mine")
    return script


def _dangling(tmp: Path) -> Path:
    link = tmp / "train.py"
    link.symlink_to(tmp / "gone.py")
    return link


def _huge(tmp: Path) -> Path:
    return _write(tmp, "huge.py", b"x = 1\n" * (9 * 1024 * 1024 // 6 + 1))


def _not_nsys_sqlite(tmp: Path) -> Path:
    import sqlite3

    path = tmp / "other.sqlite"
    sqlite3.connect(path).executescript("CREATE TABLE t (a); INSERT INTO t VALUES (1);").close()
    return path


def _old_export(tmp: Path) -> Path:
    report = _write(tmp, "r.nsys-rep", b"not really a report")
    old = _write(tmp, "r.sqlite", b"old export")
    os.utime(old, (1, 1))
    return report


BAD_SCRIPTS = {   # name -> (maker, words expected in the error line)
    "missing": (lambda t: t / "nope.py", "no such file"),
    "folder": (lambda t: t, "is a folder"),
    "binary": (lambda t: _write(t, "b.py", b"\x7fELF\x00\x01\x02"), "binary"),
    "not utf-8, no coding line": (lambda t: _write(t, "l.py", "x = 'caf\xe9'\n".encode("latin-1")), "not valid utf-8"),
    "unknown coding": (lambda t: _write(t, "c.py", "# -*- coding: klingon -*-\nx = 1\n"), "klingon"),
    "syntax error": (lambda t: _write(t, "s.py", "for x in :\n"), "not a Python script"),
    "empty": (lambda t: _write(t, "e.py", ""), ""),
    "huge": (_huge, "too large"),
    "dangling symlink": (_dangling, "no such file"),
}


@pytest.mark.parametrize("case", sorted(BAD_SCRIPTS))
@pytest.mark.parametrize("command", [("patch", "--scope", "full_iteration"), ("tune",), ("profile",)])
def test_bad_scripts_get_one_line_and_exit_2(tmp_path, case, command):
    make, words = BAD_SCRIPTS[case]
    if case == "empty" and command[0] == "profile":
        pytest.skip("an empty script is valid Python: profile runs it")
    target = make(tmp_path)
    before = snapshot(tmp_path)
    code, out, err, exception = invoke(*command[:1], *command[1:], target)
    assert_one_line_error(code, out, err, exception, 2, words)
    assert snapshot(tmp_path) == before
    assert out == ""


PATCH_CASES = {
    "damaged tune result": (lambda t: _tune_result(t, "{not json"), (), "damaged JSON"),
    "tune result not an object": (lambda t: _tune_result(t, "[1, 2]"), (), "not a cg-advise tune result"),
    "read-only script": (_read_only, ("--scope", "full_iteration", "--apply"), "read-only"),
    "backup already there": (_orig_exists, ("--scope", "full_iteration", "--apply"), "exists"),
    "scope of the other kind": (lambda t: _write(t, "train.py", SCRIPT.read_bytes()), ("--scope", "forward"),
                                "forward"),
    "unknown scope": (lambda t: _write(t, "train.py", SCRIPT.read_bytes()), ("--scope", "bogus"), "bogus"),
    "--step not there": (lambda t: _write(t, "train.py", SCRIPT.read_bytes()),
                         ("--scope", "full_iteration", "--step", "nothere"), "nothere"),
}


@pytest.mark.parametrize("case", sorted(PATCH_CASES))
def test_patch_bad_inputs(tmp_path, case):
    make, options, words = PATCH_CASES[case]
    target = make(tmp_path)
    before = snapshot(tmp_path)
    code, out, err, exception = invoke("patch", target, *options)
    assert_one_line_error(code, out, err, exception, 2, words)
    assert snapshot(tmp_path) == before


TUNE_OPTIONS = {
    "no script": ((), "cg-advise tune"),
    "unknown scope": (("--scopes", "bogus"), "bogus"),
    "empty scope list": (("--scopes", ","), "--scopes"),
    "scope of the other kind": (("--scopes", "forward"), "forward"),
    "--step not there": (("--step", "nothere"), "nothere"),
    "--iterations 0": (("--iterations", "0"), "--iterations"),
    "--budget -5": (("--budget", "-5"), "--budget"),
    "--repeats 0": (("--repeats", "0"), "--repeats"),
    "--tolerance -1": (("--tolerance", "-1"), "--tolerance"),
    "--cpus nonsense": (("--cpus", "a-b"), "--cpus"),
    "--trace missing": (("--trace", "nope.sqlite"), "nope.sqlite"),
}


@pytest.mark.parametrize("case", sorted(TUNE_OPTIONS))
def test_tune_checks_its_input_before_looking_for_cuda(tmp_path, case):
    """A bad option is exit 2 with its own message, never "no CUDA" (exit 4)."""
    options, words = TUNE_OPTIONS[case]
    script = _write(tmp_path, "train.py", SCRIPT.read_bytes())
    before = snapshot(tmp_path)
    code, out, err, exception = invoke("tune", *options, *([script] if case != "no script" else []))
    assert_one_line_error(code, out, err, exception, 2, words)
    assert snapshot(tmp_path) == before


def test_tune_on_a_script_without_a_loop(tmp_path):
    script = _write(tmp_path, "train.py", "import torch\nprint(torch.ones(2))\n")
    code, out, err, exception = invoke("tune", script)
    assert_one_line_error(code, out, err, exception, 2, "no training loop")


ANALYZE_CASES = {
    "missing": (lambda t: t / "nope.sqlite", (), 2, "nope.sqlite"),
    "folder": (lambda t: t, (), 2, ""),
    "empty file": (lambda t: _write(t, "e.sqlite", b""), (), 2, ""),
    "binary garbage": (lambda t: _write(t, "g.sqlite", os.urandom(4096)), (), 2, ""),
    "text file": (lambda t: _write(t, "t.sqlite", "hello\n"), (), 2, ""),
    "SQLite, not an nsys export": (_not_nsys_sqlite, (), 2, ""),
    "negative --ranges": (lambda t: sample("launch_eager"), ("--ranges", "-1"), 2, "--ranges"),
    "bad regex": (lambda t: sample("launch_eager"), ("--iteration-range", "("), 2, ""),
    "damaged model": (lambda t: sample("launch_eager"), ("--model", "MODEL"), 2, "not a JSON model"),
    "report without nsys, --reexport": (_old_export, ("--reexport", "--nsys", "/nonexistent/nsys"), 3, "nsys"),
}


@pytest.mark.parametrize("case", sorted(ANALYZE_CASES))
def test_analyze_bad_inputs(tmp_path, case):
    make, options, expected, words = ANALYZE_CASES[case]
    target = make(tmp_path)
    (tmp_path / "model.json").write_text("{broken")
    options = [str(tmp_path / "model.json") if o == "MODEL" else o for o in options]
    before = snapshot(tmp_path)
    code, out, err, exception = invoke("analyze", target, *options)
    assert_one_line_error(code, out, err, exception, expected, words)
    assert snapshot(tmp_path) == before   # --reexport keeps the old export when the new one cannot be made


MODEL_CASES = {
    "dataset missing": (("fit", "nope.csv", "-o", "m.json"), "nope.csv"),
    "dataset not a CSV of ours": (("fit", "BAD", "-o", "m.json"), "not a cg-advise dataset"),
    "output is a folder": (("fit", "DATASET", "-o", "."), "is a folder"),
    "output under a file": (("fit", "DATASET", "-o", "BAD/m.json"), "cannot write"),
    "eval of a binary file": (("eval", "BIN"), ""),
}


@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_model_bad_inputs(tmp_path, case, monkeypatch):
    args, words = MODEL_CASES[case]
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "bad.csv", "a,b\n1,2\n")
    _write(tmp_path, "bin.csv", os.urandom(2048))
    names = {"BAD": "bad.csv", "BIN": "bin.csv", "DATASET": str(DATASET)}
    args = [names.get(a, a).replace("BAD/", "bad.csv/") for a in args]
    before = snapshot(tmp_path)
    code, out, err, exception = invoke("model", *args)
    assert_one_line_error(code, out, err, exception, 2, words)
    assert snapshot(tmp_path) == before


def test_click_usage_errors_are_one_line():
    for args in (["analyze"], ["nope"], ["analyze", "x", "--bogus"], ["patch", "x", "--scope", "nope"]):
        code, out, err, exception = invoke(*args)
        assert_one_line_error(code, out, err, exception, 2)


# -- unusual but valid scripts: patched, applied, the diff applies with git and patch ------
def _variants():
    text = SCRIPT.read_text()
    return {
        "latin-1 with a coding line": ("# -*- coding: latin-1 -*-\n# caf\xe9 \xe0 la cr\xe8me\n" + text).encode("latin-1"),
        "CRLF line endings": text.replace("\n", "\r\n").encode(),
        "UTF-8 BOM": b"\xef\xbb\xbf" + ("# \u00e9t\u00e9\n" + text).encode(),
        "no newline at the end": text.rstrip("\n").encode(),
    }


@pytest.mark.parametrize("case", sorted(_variants()))
def test_unusual_scripts_round_trip(tmp_path, case):
    data = _variants()[case]
    script = _write(tmp_path, "train.py", data)
    script.chmod(0o755)
    printed = CliRunner().invoke(cli, ["patch", str(script), "--scope", "full_iteration"])
    assert printed.exit_code == 1 and "Traceback" not in printed.stderr
    diff = tmp_path / "change.diff"
    diff.write_bytes(printed.stdout_bytes)   # the bytes as printed, in the file's encoding
    # the printed diff applies to the file as it is, with both tools; its paths are relative to
    # the working directory, so strip as many components as that path has
    strip = "-p" + str(len(Path(os.path.relpath(script)).parts))
    commands = {"git": ["git", "apply", "--check", "--unsafe-paths", "--directory", str(tmp_path), strip, str(diff)],
                "patch": ["patch", "-d", str(tmp_path), strip, "--dry-run", "-i", str(diff)]}
    for tool, command in commands.items():
        if shutil.which(tool) is None:
            continue
        checked = subprocess.run(command, cwd="/", capture_output=True, text=True)
        assert checked.returncode == 0, (tool, checked.stdout + checked.stderr)
    code, out, err, _ = invoke("patch", script, "--scope", "full_iteration", "--apply")
    assert code == 0 and "Traceback" not in err
    backup = tmp_path / "train.py.orig"
    assert backup.read_bytes() == data                                    # byte-identical backup
    assert stat.S_IMODE(script.stat().st_mode) == 0o755                   # mode kept
    assert stat.S_IMODE(backup.stat().st_mode) == 0o755
    patched = script.read_bytes()
    if case == "CRLF line endings":
        assert patched.count(b"\n") == patched.count(b"\r\n") > 0         # every line still CRLF
    if case == "latin-1 with a coding line":
        assert "caf\xe9".encode("latin-1") in patched and "caf\xe9".encode("utf-8") not in patched
    if case == "UTF-8 BOM":
        assert patched.startswith(b"\xef\xbb\xbf") and patched.count(b"\xef\xbb\xbf") == 1
    compile(patched, str(script), "exec")                                  # Python reads it as before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_apply_through_a_symlink_keeps_the_link(tmp_path):
    real = _write(tmp_path, "real_train.py", SCRIPT.read_bytes())
    link = tmp_path / "train.py"
    link.symlink_to(real.name)
    code, _, err, _ = invoke("patch", link, "--scope", "full_iteration", "--apply")
    assert code == 0, err
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_bytes() != SCRIPT.read_bytes()
    assert (tmp_path / "train.py.orig").read_bytes() == SCRIPT.read_bytes()


@pytest.mark.skipif(cuda_available(), reason="checks the no-GPU path")
def test_latin1_script_reaches_the_cuda_check_of_tune(tmp_path):
    script = _write(tmp_path, "train.py", _variants()["latin-1 with a coding line"])
    code, out, err, exception = invoke("tune", script)
    assert_one_line_error(code, out, err, exception, 4, "no CUDA device")


# -- tune's own files -------------------------------------------------------------------------
def test_tune_removes_its_work_folder_unless_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    script = tmp_path / "train.py"
    shutil.copy(TRAIN_CPU, script)
    env = {"CG_ADVISE_ALLOW_NO_CUDA": "1"}
    common = ("tune", "--scopes", "compile", "--warmup", "2", "--iterations", "4", "--json")
    code, out, err, _ = invoke(*common, script, "--steps", "10", env=env)
    assert code in (0, 1), err
    assert not list((tmp_path / "tmp").glob("cg-advise-tune-*"))
    code, out, err, _ = invoke(*common[:1], "--keep-workdir", *common[1:], script, "--steps", "10", env=env)
    kept = list((tmp_path / "tmp").glob("cg-advise-tune-*"))
    assert len(kept) == 1 and (kept[0] / "eager.json").exists()


def test_a_script_that_changes_while_tuned_gets_no_result(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("open(__file__, 'a').write('# touched\\n')\n" + TRAIN_CPU.read_text())
    code, out, err, exception = invoke("tune", "--scopes", "compile", "--warmup", "2", "--iterations", "4", script,
                                       "--steps", "10", env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    progress, last = err.splitlines()[:-1], err.splitlines()[-1] + "\n"   # progress lines, then the error
    assert all(line.startswith("cg-advise: ") for line in progress)
    assert_one_line_error(code, out, last, exception, 2, "changed while it was being tuned")
    assert not tune_result_path(script).exists()
