"""Reads the results of SQL queries into numpy columns: through Arrow when it can, else sqlite3.

An export of a million kernels has millions of rows; Python's sqlite3 hands each back as a
tuple, which costs more than everything the analysis does with them. The ADBC SQLite driver
returns the same rows as Arrow columns (``pip install 'cg-advise[fast]'``: adbc-driver-sqlite
and nanoarrow, a few MB and no pyarrow); without it, sqlite3 reads them as before. Every
query here yields integer columns without NULLs (the SQL coalesces), so both give the same
arrays.

The Arrow reader runs the queries of one export side by side, one connection each: the driver
steps SQLite and builds each result in one batch without holding the GIL, so the kernel table
and the runtime table are read on two cores at once.
"""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import numpy as np

# rows per Arrow batch when a query's row count is unknown; the driver reserves this much up front
BATCH_ROWS = 65536
# a result of up to this many rows (its table's largest rowid) is read as one batch
ONE_BATCH_MAX_ROWS = 1 << 27


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

    def fetch_many(self, queries: list) -> list:
        """Each (sql, dtype, rows)'s columns, one query after the other."""
        return self.start(queries)()

    def start(self, queries: list):
        """fetch_many(queries), run when the returned function is called (on this thread:
        an sqlite3 connection belongs to the thread that opened it)."""
        return lambda: [self.fetch(sql, dtype) for sql, dtype, _ in queries]

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
        self._connections = [adbc_driver_manager.AdbcConnection(self._database)]
        self._pool = None

    def fetch(self, sql: str, dtype: np.dtype) -> np.ndarray:
        """The query's columns; a query the driver refuses or cannot type (a damaged table, a
        column of reals) is read by sqlite3, so both readers give the same arrays and errors."""
        return self.fetch_many([(sql, dtype, None)])[0]

    def fetch_many(self, queries: list) -> list:
        return self.start(queries)()

    def start(self, queries: list):
        """Starts reading each (sql, dtype, rows)'s columns, the queries at once on connections
        of their own, and returns the function that waits for them; what the driver fails is
        read by sqlite3 then (its connection is the caller's thread's). ``rows``, the most rows
        a query can return (None: unknown), lets the driver build the whole result as one batch
        inside execute_query, where it lets go of the GIL (later batches are fetched holding it):
        the caller's thread is free meanwhile."""
        if self._pool is not None:   # the connections are the last call's until its queries end
            self._pool.shutdown(wait=True)
        while len(self._connections) < len(queries):
            self._connections.append(self._manager.AdbcConnection(self._database))
        self._pool = ThreadPoolExecutor(max(len(queries), 1))
        pending = [self._pool.submit(self._try_fetch, connection, *query)
                   for connection, query in zip(self._connections, queries)]

        def wait() -> list:
            return [self._fallback.fetch(sql, dtype) if future.result() is None else future.result()
                    for future, (sql, dtype, _) in zip(pending, queries)]
        return wait

    def _try_fetch(self, connection, sql: str, dtype: np.dtype, rows):
        try:
            return self._fetch(connection, sql, dtype, rows)
        except Exception:  # noqa: BLE001 - the standard library says what is wrong, in its own terms
            return None

    def _fetch(self, connection, sql: str, dtype: np.dtype, rows) -> np.ndarray:
        import nanoarrow

        statement = self._manager.AdbcStatement(connection)
        batch = rows + 1 if rows is not None and rows < ONE_BATCH_MAX_ROWS else BATCH_ROWS
        try:
            statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch)})
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            with nanoarrow.c_array_stream(stream) as batches:
                held = list(batches)   # one batch, unless a result outgrows BATCH_ROWS
                views = [batch.view() for batch in held]
                out = np.empty(sum(view.length for view in views), dtype)
                at = 0
                for view in views:   # each column straight from the batch's buffer into its field
                    for i, name in enumerate(dtype.names):
                        out[name][at:at + view.length] = _integers(view.child(i))
                    at += view.length
        finally:
            statement.close()
        return out

    def close(self) -> None:
        if self._pool is not None:   # no connection closed under a query still running
            self._pool.shutdown(wait=True)
        for connection in self._connections:
            connection.close()
        self._database.close()


def _integers(child) -> np.ndarray:
    """One Arrow column of a batch as int64 (SQLite integers; an all-NULL column is zeros)."""
    if child.length == 0 or child.n_buffers < 2 or child.null_count == child.length:
        return np.zeros(child.length, np.int64)
    if child.storage_type != "int64":   # a REAL column: its bits are no integers
        raise TypeError(f"column of Arrow type {child.storage_type}, not int64")
    # a view of the batch's buffer (the caller copies it before the batch goes)
    values = np.frombuffer(child.buffer(1), dtype=np.int64)[child.offset:child.offset + child.length]
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
