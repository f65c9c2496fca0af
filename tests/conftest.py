import shutil
import sqlite3
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "sample_traces"


def sample(name: str) -> Path:
    return TRACES / f"{name}.sqlite"


def bench_module(name: str):
    """A script of bench/ imported as a module (bench/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sql(path, query, *params):
    """Runs plain SQL on an export: the independent computation the tests compare against."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def rewrite(path, script: str) -> None:
    """Changes a copied export with plain SQL (deleting ranges, renaming to older schemas)."""
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()


@pytest.fixture
def copy_sample(tmp_path):
    def _copy(name: str) -> Path:
        target = tmp_path / f"{name}.sqlite"
        shutil.copy(sample(name), target)
        return target

    return _copy


def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def requires_cuda(test):
    """Skips the test without a CUDA GPU and marks it `cuda`, so that `pytest -m cuda` runs just
    the GPU tests on the lent machine (a bare skipif left them out of that selection)."""
    return pytest.mark.cuda(pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU")(test))
