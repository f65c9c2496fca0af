"""The bad-input table of tests/test_bad_inputs.py, run and printed as Markdown: each case,
the command, the exit code and the one line the user sees (the tests assert the same).

    python bench/bad_inputs.py > bench/results/bad_inputs.md
"""
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import test_bad_inputs as t  # noqa: E402


def rows():
    def one(case, command, make, options=(), prepare=None):
        with tempfile.TemporaryDirectory() as folder:
            folder = Path(folder)
            if prepare:
                prepare(folder)
            target = make(folder)
            args = [*command, *options]
            code, _, err, _ = t.invoke(*args[:1], *([target] if target is not None else []), *args[1:])
            line = err.strip().splitlines()[-1] if err.strip() else ""
            shown = " ".join(str(a) for a in args) + (" FILE" if target is not None else "")
            return case, shown, code, line.replace(str(folder), "DIR")

    for case, (make, _) in sorted(t.BAD_SCRIPTS.items()):
        for command in (("patch", "--scope", "full_iteration"), ("tune",), ("profile",)):
            yield one(case, command[:1], make, command[1:])
    for case, (make, options, _) in sorted(t.PATCH_CASES.items()):
        yield one(case, ("patch",), make, options)
    for case, (options, _) in sorted(t.TUNE_OPTIONS.items()):
        make = (lambda f: None) if case == "no script" else (lambda f: t._write(f, "train.py", t.SCRIPT.read_bytes()))
        yield one(case, ("tune",), make, options)
    for case, (make, options, _, _) in sorted(t.ANALYZE_CASES.items()):
        def model(folder):
            (folder / "model.json").write_text("{broken")
        yield one(case, ("analyze",), make, [o if o != "MODEL" else "model.json" for o in options], model)


def main():
    print("| case | command | exit | what the user sees (stderr) |")
    print("| --- | --- | --- | --- |")
    for case, command, code, line in rows():
        print(f"| {case} | `cg-advise {command}` | {code} | `{line}` |")


if __name__ == "__main__":
    main()
