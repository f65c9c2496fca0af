"""GPU check of `clone_outputs`: a loop that keeps its losses (tests/corpus/loss_history.py),
run eagerly, patched with full_iteration (the helper hands out copies), and patched with the
copies switched off. Each prints its first and last loss, seeded alike: without copies every
kept loss is the graph's one output tensor, so "first" reads the last step's value.

    python bench/gpu_clone_outputs.py    # on the GPU machine, after source .devkit/nsys-env.sh
"""
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.patch import make_patch  # noqa: E402

SCRIPT = ROOT / "tests" / "corpus" / "loss_history.py"
SEEDED = "import runpy, sys, torch; torch.manual_seed(0); runpy.run_path(sys.argv[1], run_name='__main__')"


def main():
    folder = Path(tempfile.mkdtemp(prefix="cg-clone-"))
    patched = make_patch(SCRIPT, "full_iteration").patched
    variants = {"eager": SCRIPT, "patched": folder / "patched.py", "patched, no copies": folder / "no_copies.py"}
    variants["patched"].write_text(patched)
    variants["patched, no copies"].write_text(patched.replace(", clone_outputs=True", ""))
    for name, path in variants.items():
        run = subprocess.run([sys.executable, "-c", SEEDED, str(path)], capture_output=True, text=True)
        print(f"{name}: {(run.stdout or run.stderr).strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
