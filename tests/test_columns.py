"""The columnar reader (ADBC + nanoarrow) and the sqlite3 fallback give the same analysis."""

import json

import pytest

from advisor import columns
from advisor.analysis import analyse
from advisor.trace import open_trace
from conftest import TRACES

TRACE_NAMES = [p.stem for p in sorted(TRACES.glob("*.sqlite")) if p.stem != "nvtx_only"]


def analysed(name, arrow: bool, monkeypatch):
    monkeypatch.setattr(columns, "arrow_available", lambda: arrow)
    return json.loads(json.dumps(analyse(open_trace(TRACES / f"{name}.sqlite")).to_dict(), default=str))


@pytest.mark.skipif(not columns.arrow_available(), reason="adbc-driver-sqlite / nanoarrow not installed")
@pytest.mark.parametrize("name", TRACE_NAMES)
def test_arrow_and_sqlite3_readers_give_the_same_analysis(name, monkeypatch):
    assert analysed(name, True, monkeypatch) == analysed(name, False, monkeypatch)


@pytest.mark.skipif(not columns.arrow_available(), reason="adbc-driver-sqlite / nanoarrow not installed")
def test_the_arrow_reader_is_the_one_used_when_installed(tmp_path):
    import sqlite3

    path = TRACES / "launch_eager.sqlite"
    conn = sqlite3.connect(path)
    assert columns.reader(path, conn).name == "adbc"
    assert columns.reader(path, conn, prefer_arrow=False).name == "sqlite3"
    conn.close()


def test_columns_with_nulls_read_as_zero(tmp_path):
    """Both readers turn NULL into 0 (the SQL coalesces; the reader does too for safety)."""
    import sqlite3

    import numpy as np

    path = tmp_path / "t.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (a INTEGER, b INTEGER);"
                       "INSERT INTO t VALUES (1, 2), (3, NULL), (5, 6);")
    conn.commit()
    dtype = np.dtype([("a", "i8"), ("b", "i8")])
    got = [columns.SqliteColumns(path, conn).fetch("SELECT a, coalesce(b, 0) FROM t", dtype)]
    if columns.arrow_available():
        reader = columns.ArrowColumns(path, conn)
        got.append(reader.fetch("SELECT a, b FROM t", dtype))
        reader.close()
    for rows in got:
        assert rows["a"].tolist() == [1, 3, 5] and rows["b"].tolist() == [2, 0, 6]
    conn.close()
