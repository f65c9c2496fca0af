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


@pytest.mark.skipif(not columns.arrow_available(), reason="adbc-driver-sqlite / nanoarrow not installed")
def test_a_column_of_reals_reads_as_sqlite3_reads_it(tmp_path):
    """The Arrow reader takes integers only; anything else goes through sqlite3, same values."""
    import sqlite3

    import numpy as np

    path = tmp_path / "r.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (a REAL, b INTEGER); INSERT INTO t VALUES (2.5, 1), (3.0, 2);")
    conn.commit()
    dtype = np.dtype([("a", "i8"), ("b", "i8")])
    reader = columns.ArrowColumns(path, conn)
    arrow = reader.fetch("SELECT a, b FROM t", dtype)
    reader.close()
    assert arrow.tolist() == columns.SqliteColumns(path, conn).fetch("SELECT a, b FROM t", dtype).tolist()
    conn.close()


def test_a_path_with_uri_characters_opens_read_only(tmp_path):
    """'?' and '#' in a folder name stay part of the path (no stray file, read-only kept)."""
    import shutil

    folder = tmp_path / "q?dir#x"
    folder.mkdir()
    shutil.copy(TRACES / "launch_eager.sqlite", folder / "t.sqlite")
    assert analyse(open_trace(folder / "t.sqlite")).main.summary.iterations == 40
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q?dir#x"]


@pytest.mark.skipif(not columns.arrow_available(), reason="adbc-driver-sqlite / nanoarrow not installed")
def test_queries_read_at_once_give_what_sqlite3_gives_one_by_one(tmp_path):
    """The Arrow reader's concurrent queries (one batch each where the row bound is given,
    several where it is too small or unknown) and a query it cannot type, read by sqlite3."""
    import sqlite3

    import numpy as np

    path = tmp_path / "m.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE a (x INTEGER, y INTEGER); CREATE TABLE b (x REAL);")
    conn.executemany("INSERT INTO a VALUES (?, ?)", [(i, i * i) for i in range(1000)])
    conn.executemany("INSERT INTO b VALUES (?)", [(i / 2,) for i in range(10)])
    conn.commit()
    two, one = np.dtype([("x", "i8"), ("y", "i8")]), np.dtype([("x", "i8")])
    queries = [("SELECT x, y FROM a", two, 1000), ("SELECT x, y FROM a WHERE x % 3 = 0", two, 10),
               ("SELECT x FROM a ORDER BY x DESC", one, None), ("SELECT x FROM b", one, 10)]
    reader = columns.ArrowColumns(path, conn)
    arrow = reader.fetch_many(queries)
    reader.close()
    plain = columns.SqliteColumns(path, conn).fetch_many(queries)
    assert [rows.tolist() for rows in arrow] == [rows.tolist() for rows in plain]
    assert arrow[0]["y"].tolist() == [i * i for i in range(1000)]
    assert arrow[3]["x"].tolist() == [int(i / 2) for i in range(10)]
    conn.close()


@pytest.mark.parametrize("arrow", [True, False] if columns.arrow_available() else [False])
def test_big_tables_read_in_chunks_give_the_same_analysis(arrow, monkeypatch):
    """A table bigger than CHUNK_ROWS is read a rowid range at a time, straight into the
    operations array: the same analysis as one read of the whole table."""
    whole = analysed("mixed_eager", arrow, monkeypatch)
    monkeypatch.setattr(columns, "CHUNK_ROWS", 7)
    assert analysed("mixed_eager", arrow, monkeypatch) == whole


@pytest.mark.skipif(not columns.arrow_available(), reason="adbc-driver-sqlite / nanoarrow not installed")
def test_chunks_miss_no_row_whatever_the_rowids(tmp_path, monkeypatch):
    """Rowids below 1 and above the bound (a wrong bound) are read, in rowid order, into
    ``out`` where they fit and into a new array where they do not."""
    import sqlite3

    import numpy as np

    path = tmp_path / "c.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE t (x INTEGER, y INTEGER);")
    rowids = [-5, 0] + list(range(1, 40)) + [100, 101]
    conn.executemany("INSERT INTO t (rowid, x, y) VALUES (?, ?, ?)", [(r, r * 2, r * 3) for r in rowids])
    conn.commit()
    monkeypatch.setattr(columns, "CHUNK_ROWS", 4)
    read = np.dtype([("x", "i8"), ("y", "i8")])
    wide = np.dtype([("x", "i8"), ("y", "i8"), ("z", "i1")])
    sql = "SELECT x, y FROM t WHERE {rows} AND x % 3 != 1"
    want = [(r * 2, r * 3) for r in rowids if (r * 2) % 3 != 1]
    reader = columns.ArrowColumns(path, conn)
    for rows, out_rows in ((39, None), (39, 60), (39, 10), (None, 5)):
        out = None if out_rows is None else np.zeros(out_rows, wide)
        got = reader.fetch_many([(sql, read, rows, out)])[0]
        plain = columns.SqliteColumns(path, conn).fetch(sql, read, None if out is None else np.zeros(len(out), wide))
        assert [(a, b) for a, b, *_ in got.tolist()] == want == [(a, b) for a, b, *_ in plain.tolist()]
        if out is not None:
            assert got.dtype == wide and np.may_share_memory(got, out) == (len(want) <= len(out))
    reader.close()
    conn.close()


@pytest.mark.parametrize("arrow", [True, False] if columns.arrow_available() else [False])
def test_a_rowid_far_past_the_row_count_does_not_size_the_arrays(arrow, tmp_path, monkeypatch):
    """The largest rowid bounds a table's rows only as far as the file could hold them: one row
    moved to rowid 10**12 was a 38 TiB allocation (an unexpected MemoryError)."""
    import shutil
    import sqlite3

    whole = analysed("launch_eager", arrow, monkeypatch)
    path = tmp_path / "launch_eager.sqlite"
    shutil.copy(TRACES / "launch_eager.sqlite", path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = 1000000000000 "
                 "WHERE rowid = (SELECT MAX(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    conn.commit()
    conn.close()
    moved = json.loads(json.dumps(analyse(open_trace(path)).to_dict(), default=str))
    moved["trace"]["path"] = whole["trace"]["path"]
    assert moved == whole
