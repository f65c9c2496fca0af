"""Reads the result of one SQL query into numpy columns: through Arrow when it can, else sqlite3.

An export of a million kernels has millions of rows; Python's sqlite3 hands each back as a
tuple, which costs more than everything the analysis does with them. The ADBC SQLite driver
returns the same rows as Arrow columns (``pip install 'cg-advise[fast]'``: adbc-driver-sqlite
and nanoarrow, a few MB and no pyarrow); without it, sqlite3 reads them as before. Every
query here yields integer columns without NULLs (the SQL coalesces), so both give the same
arrays.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

import numpy as np

BATCH_ROWS = 65536


def read_only_uri(path) -> str:
    """``file:`` URI that opens ``path`` read-only, whatever characters it holds (a ``?`` or
    ``#`` in a folder name would otherwise end the path, and ``mode=ro`` with it)."""
    return f"file:{quote(str(Path(path).resolve()))}?mode=ro"


def arrow_available() -> bool:
    try:
        import adbc_driver_manager  # noqa: F401
        import adbc_driver_sqlite  # noqa: F401
        import nanoarrow  # noqa: F401
    except ImportError:
        return False
    return True


class SqliteColumns:
    """Row by row through the standard library: the fallback, always there."""

    name = "sqlite3"

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.conn = conn

    def fetch(self, sql: str, dtype: np.dtype) -> np.ndarray:
        return np.fromiter(self.conn.execute(sql), dtype=dtype)

    def close(self) -> None:
        pass


class ArrowColumns:
    """Column by column through the ADBC SQLite driver and nanoarrow (no Python object per row)."""

    name = "adbc"

    def __init__(self, path: Path, conn: sqlite3.Connection):
        import adbc_driver_manager
        import adbc_driver_sqlite

        self._manager = adbc_driver_manager
        self._database = adbc_driver_sqlite.connect(read_only_uri(path))
        self._fallback = SqliteColumns(path, conn)
        self._connection = adbc_driver_manager.AdbcConnection(self._database)

    def fetch(self, sql: str, dtype: np.dtype) -> np.ndarray:
        """The query's columns; a query the driver refuses or cannot type (a damaged table, a
        column of reals) is read by sqlite3, so both readers give the same arrays and errors."""
        try:
            return self._fetch(sql, dtype)
        except Exception:  # noqa: BLE001 - the standard library says what is wrong, in its own terms
            return self._fallback.fetch(sql, dtype)

    def _fetch(self, sql: str, dtype: np.dtype) -> np.ndarray:
        import nanoarrow

        statement = self._manager.AdbcStatement(self._connection)
        try:
            statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            names = dtype.names
            parts = [[] for _ in names]
            with nanoarrow.c_array_stream(stream) as batches:
                for batch in batches:
                    view = batch.view()
                    for i in range(len(names)):
                        parts[i].append(_integers(view.child(i)))
        finally:
            statement.close()
        out = np.empty(sum(len(p) for p in parts[0]) if parts else 0, dtype)
        for name, chunks in zip(names, parts):
            out[name] = np.concatenate(chunks) if chunks else np.empty(0, np.int64)
        return out

    def close(self) -> None:
        self._connection.close()
        self._database.close()


def _integers(child) -> np.ndarray:
    """One Arrow column of a batch as int64 (SQLite integers; an all-NULL column is zeros)."""
    if child.length == 0 or child.n_buffers < 2 or child.null_count == child.length:
        return np.zeros(child.length, np.int64)
    if child.storage_type != "int64":   # a REAL column: its bits are no integers
        raise TypeError(f"column of Arrow type {child.storage_type}, not int64")
    # a copy: the batch's memory is released when the stream moves on
    values = np.frombuffer(child.buffer(1), dtype=np.int64)[child.offset:child.offset + child.length].copy()
    if child.null_count:
        valid = np.unpackbits(np.frombuffer(child.buffer(0), np.uint8), bitorder="little")
        values = np.where(valid[child.offset:child.offset + child.length].astype(bool), values, 0)
    return values


def reader(path: Path, conn: sqlite3.Connection, prefer_arrow: bool = True):
    """The fastest reader installed (Arrow, else sqlite3); one that fails to open falls back."""
    if prefer_arrow and arrow_available():
        try:
            return ArrowColumns(path, conn)
        except Exception:  # noqa: BLE001 - a driver that cannot open the file: the standard library can
            pass
    return SqliteColumns(path, conn)
