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

A query whose SQL holds ``{rows}`` and whose table is big is read a chunk of rowids at a time
(``{rows}`` becomes each chunk's rowid range, or ``1``): each chunk is one batch of a few MB,
built by the driver inside execute_query and copied into its place in the result (or in the
caller's ``out``), so the driver's buffers are small, reused, and never a second copy of the
table. Rows come in rowid order either way, as a scan of the whole table gives them.
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
# rowids per chunk of a query with {rows}: 8 MB per column, one batch each
CHUNK_ROWS = 1 << 20
ROWS = "{rows}"


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

    def fetch(self, sql: str, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
        rows = np.fromiter(self.conn.execute(sql.replace(ROWS, "1")), dtype=dtype)
        if out is None:
            return rows
        placed = out[:len(rows)] if len(rows) <= len(out) else np.empty(len(rows), out.dtype)
        for name in dtype.names:
            placed[name] = rows[name]
        return placed

    def fetch_many(self, queries: list) -> list:
        """Each (sql, dtype, rows[, out])'s columns, one query after the other (see
        ArrowColumns.start)."""
        return self.start(queries)()

    def start(self, queries: list):
        """fetch_many(queries), run when the returned function is called (on this thread:
        an sqlite3 connection belongs to the thread that opened it)."""
        return lambda: [self.fetch(query[0], query[1], _out(query)) for query in queries]

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

    def fetch(self, sql: str, dtype: np.dtype, out: np.ndarray | None = None) -> np.ndarray:
        """The query's columns; a query the driver refuses or cannot type (a damaged table, a
        column of reals) is read by sqlite3, so both readers give the same arrays and errors."""
        return self.fetch_many([(sql, dtype, None, out)])[0]

    def fetch_many(self, queries: list) -> list:
        return self.start(queries)()

    def start(self, queries: list):
        """Starts reading each (sql, dtype, rows[, out])'s columns, the queries at once on
        connections of their own, and returns the function that waits for them; what the driver
        fails is read by sqlite3 then (its connection is the caller's thread's). ``rows``, the
        most rows a query can return (None: unknown), lets the driver build the whole result,
        or each chunk of it, as one batch inside execute_query, where it lets go of the GIL
        (later batches are fetched holding it): the caller's thread is free meanwhile.
        ``out``, where given, is where the rows go: the fields of ``dtype`` (the query's
        columns, in order) of its first rows, which come back as ``out[:n]`` (its other fields
        left to the caller); a result that outgrows it comes back as a new array of its dtype."""
        if self._pool is not None:   # the connections are the last call's until its queries end
            self._pool.shutdown(wait=True)
        while len(self._connections) < len(queries):
            self._connections.append(self._manager.AdbcConnection(self._database))
        self._pool = ThreadPoolExecutor(max(len(queries), 1))
        pending = [self._pool.submit(self._try_fetch, connection, query[0], query[1], query[2], _out(query))
                   for connection, query in zip(self._connections, queries)]

        def wait() -> list:
            return [self._fallback.fetch(query[0], query[1], _out(query)) if future.result() is None
                    else future.result() for future, query in zip(pending, queries)]
        return wait

    def _try_fetch(self, connection, sql: str, dtype: np.dtype, rows, out):
        try:
            return self._fetch(connection, sql, dtype, rows, out)
        except Exception:  # noqa: BLE001 - the standard library says what is wrong, in its own terms
            return None

    def _fetch(self, connection, sql: str, dtype: np.dtype, rows, out) -> np.ndarray:
        own = out is None and rows is not None   # the result's array, sized by the bound
        target = np.empty(rows, dtype) if own else out
        at, spilled = 0, []   # rows that do not fit the target: new arrays, in order
        for chunk_sql, batch in _chunks(sql, rows):
            for view in self._batches(connection, chunk_sql, batch):
                n = view.length
                if target is not None and not spilled and at + n <= len(target):
                    place, at = target[at:at + n], at + n
                else:
                    place = np.empty(n, dtype if target is None else target.dtype)
                    spilled.append(place)
                for i, name in enumerate(dtype.names):   # each column straight from the batch into its field
                    place[name] = _integers(view.child(i))
        if target is None:
            return np.concatenate(spilled) if spilled else np.empty(0, dtype)
        if spilled:
            return np.concatenate([target[:at]] + spilled)
        if own and at < len(target):
            target.resize(at, refcheck=False)   # gives back the untouched tail, in place (no copy)
            return target
        return target[:at]

    def _batches(self, connection, sql: str, batch: int):
        """The query's Arrow batches, each as a nanoarrow view (valid while it is iterated)."""
        import nanoarrow

        statement = self._manager.AdbcStatement(connection)
        try:
            statement.set_options(**{"adbc.sqlite.query.batch_rows": str(batch)})
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            with nanoarrow.c_array_stream(stream) as batches:
                for held in batches:
                    yield held.view()
        finally:
            statement.close()

    def close(self) -> None:
        if self._pool is not None:   # no connection closed under a query still running
            self._pool.shutdown(wait=True)
        for connection in self._connections:
            connection.close()
        self._database.close()


def _out(query: tuple):
    return query[3] if len(query) > 3 else None


def _chunks(sql: str, rows):
    """(sql, rows per batch) of each chunk a query is read in: its rowids CHUNK_ROWS at a time
    where its SQL has the {rows} placeholder and its table is bigger (the first chunk takes
    every rowid below, the last every one above: no row is missed whatever the bound), else
    the query whole."""
    if rows is None or rows > ONE_BATCH_MAX_ROWS and ROWS not in sql:
        return [(sql.replace(ROWS, "1"), BATCH_ROWS)]
    if ROWS not in sql or rows <= CHUNK_ROWS:
        return [(sql.replace(ROWS, "1"), rows + 1)]
    edges = list(range(CHUNK_ROWS, rows, CHUNK_ROWS))
    ranges = [f"rowid <= {edges[0]}"] + [f"rowid > {lo} AND rowid <= {lo + CHUNK_ROWS}" for lo in edges[:-1]] \
        + [f"rowid > {edges[-1]}"]
    return [(sql.replace(ROWS, f"({where})"), CHUNK_ROWS + 1) for where in ranges]


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
