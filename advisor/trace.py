"""Opens an Nsight Systems SQLite export and reads what the analysis needs as column arrays.

Every table is read with one query into numpy (never one Python object per row), and every
schema difference between nsys 2022.x and 2025.x is absorbed here, so the analysers see one
shape: GPU operations, runtime calls, NVTX ranges, and names.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import sqlite_utils

from .columns import ROWS, read_only_uri, reader
from .errors import TraceError, file_head
from .intervals import in_order

META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")
# tables only Nsight Systems writes: an export from before the metadata table (nsys < 2021)
# is recognised by these
NSYS_TABLES = ("StringIds", "TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU", "TARGET_INFO_SESSION_START_TIME",
               "ThreadNames", "ANALYSIS_DETAILS", "PROCESSES", "NVTX_EVENTS")
KERNEL, MEMCPY, MEMSET, GRAPH_TRACE = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
)
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"

# Kinds of GPU operation, in the `kind` column of Trace.ops.
OP_KERNEL, OP_MEMCPY, OP_MEMSET, OP_GRAPH = 0, 1, 2, 3
OP_TABLES = ((OP_KERNEL, KERNEL), (OP_MEMCPY, MEMCPY), (OP_MEMSET, MEMSET), (OP_GRAPH, GRAPH_TRACE))

# Categories of runtime/driver call, in the `category` column of Trace.runtime.
CALL_OTHER, CALL_LAUNCH, CALL_GRAPH_LAUNCH, CALL_SYNC = 0, 1, 2, 3
LAUNCH_CALLS = {
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernelMultiDevice", "cuLaunchKernel", "cuLaunchKernelEx",
    "cuLaunchCooperativeKernel", "cuLaunchGrid", "cuLaunchGridAsync",
}
GRAPH_LAUNCH_CALLS = {"cudaGraphLaunch", "cuGraphLaunch"}
# Calls that block the host until the GPU catches up; each one also breaks stream capture.
SYNC_CALLS = {
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyFromSymbol", "cudaMemcpyToSymbol",
    "cudaMemcpyPeer", "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyHtoD", "cuMemcpyDtoD", "cuMemcpyPeer",
}
_VERSION_SUFFIX = re.compile(r"_v\d+$")

NVTX_PUSH_POP, NVTX_START_END = 59, 60
PID_MASK = np.int64(~0xFFFFFF)  # globalTid & PID_MASK == globalPid (nsys: & 0xFFFFFFFFFF000000)

OPS_DTYPE = np.dtype([
    ("start", "i8"), ("end", "i8"), ("device", "i8"), ("pid", "i8"),
    ("corr", "i8"), ("kind", "i1"), ("in_graph", "?"), ("name", "i4"),
])   # name: a kernel's short-name id (nsys: StringIds; Kineto: its own numbering), a copy's copyKind
#       (CUPTI's: HOST_TO_DEVICE; 0 where the export does not say), 0 for the rest
HOST_TO_DEVICE = (1, 3)   # CUPTI copyKind: host to device, host to array
RUNTIME_DTYPE = np.dtype([("start", "i8"), ("end", "i8"), ("tid", "i8"), ("corr", "i8"), ("name_id", "i8")])
NVTX_DTYPE = np.dtype([("start", "i8"), ("end", "i8"), ("tid", "i8"), ("event_type", "i4"), ("name", "i8")])

# Kernels of the families a compiler (torch.compile's Inductor) generates code for itself:
# PyTorch's elementwise and reduction kernels, normalisation (cuDNN's batch norm too), softmax,
# dropout, layout transposes, concatenation, gathers and scatters. Matched case-insensitively in
# the kernel's short name; a name that matches none (GEMMs, convolutions, attention, cuBLAS's
# plain `Kernel`/`Kernel2`, the optimizer's multi-tensor kernels) is not fusible: what compile can
# take out of a GPU-bound iteration is bounded by these kernels' time, not by guesses.
FUSIBLE_KERNEL_MARKS = ("elementwise", "reduce_kernel", "batch_norm", "batchnorm", "bn_fw", "bn_bw", "layer_norm",
                        "layernorm", "gammabeta", "rmsnorm", "softmax", "dropout", "nchwtonhwc", "nhwctonchw",
                        "transpose", "catarray", "index", "gather", "scatter")
# library kernels whose names can hold one of those marks (cuBLAS's split-K reduction of a GEMM,
# a CUTLASS GEMM with a gather): never fusible
LIBRARY_KERNEL_MARKS = ("gemm", "splitk", "cutlass", "xmma", "cublas", "conv", "nvjet")


# The optimizer's kernels: torch.optim's foreach and fused steps (and apex's, DeepSpeed's) launch
# multi-tensor kernels; a step's gradient clipping, AMP's unscale and a zero_grad that keeps the
# tensors launch them too, once a step each, and a GradScaler's update its own kernel after the
# step. What marks a training step in a trace without cg-advise's ranges (advisor/steps.py).
SCALER_KERNEL_MARKS = ("amp_update_scale",)
OPTIMIZER_KERNEL_MARKS = ("multi_tensor_apply",) + SCALER_KERNEL_MARKS


def _marked(name: str, marks: tuple) -> bool:
    """Whether the kernel name holds one of the marks, case aside."""
    lowered = name.lower()
    return any(mark in lowered for mark in marks)


def is_optimizer_kernel(name: str) -> bool:
    return _marked(name, OPTIMIZER_KERNEL_MARKS)


def is_scaler_kernel(name: str) -> bool:
    """torch.amp.GradScaler.update's kernel: the loop steps its optimizer through a scaler."""
    return _marked(name, SCALER_KERNEL_MARKS)


def is_fusible_kernel(name: str) -> bool:
    """Whether a kernel of this name is one a compiler fuses or generates (FUSIBLE_KERNEL_MARKS and
    none of LIBRARY_KERNEL_MARKS)."""
    return _marked(name, FUSIBLE_KERNEL_MARKS) and not _marked(name, LIBRARY_KERNEL_MARKS)


def strip_version(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``."""
    return _VERSION_SUFFIX.sub("", name)


def pid_of(global_id):
    """The operating-system PID inside a globalTid or globalPid."""
    return (np.asarray(global_id) >> 24) & 0xFFFFFF


@dataclass
class Trace:
    """One opened export: versions, processes, devices, and column arrays of its events."""

    path: Path
    schema_version: str
    nsys_version: str
    graph_mode: str                      # "graph", "node" or "none": how graphs were traced
    ops: np.ndarray                      # OPS_DTYPE, sorted by start
    runtime: np.ndarray                  # RUNTIME_DTYPE, sorted by start
    runtime_category: np.ndarray         # CALL_* per runtime row
    runtime_names: dict                  # name_id -> name without version suffix (CUDA calls only)
    has_runtime: bool                    # the export traced CUDA calls
    nvtx: np.ndarray                     # NVTX_DTYPE: closed push/pop and start/end ranges
    nvtx_names: list                     # NVTX_DTYPE.name indexes this list
    processes: dict = field(default_factory=dict)   # pid -> process name
    devices: dict = field(default_factory=dict)     # device id -> GPU name
    pytorch: bool = True                 # PyTorch's kernels or cg-advise's ranges are in it
    backend: str = "nsys"                # what recorded it: "nsys" or "torch.profiler" (advisor/kineto.py)
    fusible_names: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))   # sorted ops["name"] ids
                                         # of the kernels a compiler fuses or generates (is_fusible_kernel)
    optimizer_names: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))   # sorted ops["name"]
                                         # ids of the optimizer's kernels (is_optimizer_kernel)
    scaler_names: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))   # ... a GradScaler's

    @property
    def profiler(self) -> str:
        """What recorded the trace, for the report's first line."""
        return f"nsys {self.nsys_version}, export schema {self.schema_version}"

    @property
    def has_cuda(self) -> bool:
        return len(self.ops) > 0 or len(self.runtime) > 0 or self.cpu_span_any()

    def cpu_span(self, global_pid: int):
        """(first CUDA call's start, last call's end) of one process, every call counted: the
        window of a run without iterations. Asked of the file only then (a scan of all calls)."""
        if not self.has_runtime:
            return None
        row = self._query(f"SELECT MIN(start), MAX(end) FROM {RUNTIME} WHERE globalTid & {int(PID_MASK)} = ?",
                          (int(global_pid),))
        return (int(row[0]), int(row[1])) if row and row[0] is not None else None

    def cpu_span_any(self) -> bool:
        return self.has_runtime and self._query(f"SELECT 1 FROM {RUNTIME} LIMIT 1") is not None

    def _query(self, sql: str, params=()):
        conn = sqlite3.connect(read_only_uri(self.path), uri=True)
        try:
            return conn.execute(sql, params).fetchone()
        finally:
            conn.close()


def open_trace(path) -> Trace:
    """Reads an exported ``.sqlite`` report, or a torch.profiler (Kineto) trace, ``.json`` or
    ``.json.gz`` (advisor/kineto.py), told apart by their first bytes; raises TraceError with
    one line on bad input."""
    path = Path(path)
    head = file_head(path, ", not an Nsight Systems export or a torch.profiler trace", TraceError)
    if head != b"SQLite format 3\x00":
        from .kineto import looks_like_json, open_kineto

        if looks_like_json(path):
            return open_kineto(path)
        raise TraceError(f"{path}: not an SQLite file (expected an export from `nsys export --type sqlite`) "
                         "nor a torch.profiler trace (.json, .json.gz)")
    try:
        conn = sqlite3.connect(read_only_uri(path), uri=True)
        return _read(path, sqlite_utils.Database(conn))
    except sqlite3.DatabaseError as error:
        raise TraceError(f"{path}: unreadable SQLite file ({error}); is it truncated or corrupt?") from None


def is_nsys_export(tables: set) -> bool:
    """An Nsight Systems export by the tables it has: the metadata table (2021 and later), or
    CUDA activity tables beside nsys's own ones (older releases)."""
    if any(t in tables for t in META_TABLES):
        return True
    ours = sum(t in tables for t in NSYS_TABLES)
    return ours >= 2 or (ours >= 1 and any(t.startswith("CUPTI_ACTIVITY_KIND_") for t in tables))


def _read(path: Path, db: sqlite_utils.Database) -> Trace:
    tables = set(db.table_names())
    if not is_nsys_export(tables):
        raise TraceError(f"{path}: an SQLite file, but not an Nsight Systems export (none of its tables: "
                         f"{META_TABLES[0]}, CUPTI_ACTIVITY_KIND_*, StringIds, TARGET_INFO_GPU)")
    meta_table = next((t for t in META_TABLES if t in tables), None)
    meta = dict(db.execute(f"SELECT name, value FROM {meta_table}").fetchall()) if meta_table else {}
    schema = meta.get("EXPORT_SCHEMA_VERSION") or ".".join(
        str(meta.get(f"EXPORT_SCHEMA_VERSION_{part}", "?")) for part in ("MAJOR", "MINOR", "MICRO")
    )
    if not meta_table:
        schema = "unknown (no export metadata: nsys before 2021)"
    nsys_version = str(meta.get("EXPORT_PRODUCT_VERSION", "unknown"))
    columns = {t: set(db[t].columns_dict) for t in tables if t.startswith(("CUPTI_", "NVTX_"))}
    strings = "StringIds" in tables

    op_queries = _op_queries(columns)
    names = _call_names(db, strings) if RUNTIME in columns else {}
    runtime_query = _runtime_query(columns, strings, names)
    # the operations of every table are read straight into one array, each table after the last
    bounds = [_rows_at_most(db, table) for _, table, _, _ in op_queries]
    buffer = np.empty(sum(bounds), OPS_DTYPE) if None not in bounds else None
    queries, at = [], 0
    for (_, _, sql, dtype), bound in zip(op_queries, bounds):
        out = buffer[at:at + bound] if buffer is not None else np.empty(0, OPS_DTYPE)
        queries.append((sql, dtype, bound, out))
        at += bound or 0
    if runtime_query:
        queries.append((*runtime_query, _rows_at_most(db, RUNTIME)))
    columns_reader = reader(path, db.conn)
    try:   # the big tables side by side (the Arrow reader runs them at once), the small ones meanwhile
        wait = columns_reader.start(queries)
        nvtx, nvtx_names = _read_nvtx(db, columns, strings)
        results = wait()
    finally:
        columns_reader.close()
    del queries
    ops = _ops(op_queries, results[:len(op_queries)], buffer, bounds)
    runtime, category = _runtime(results[len(op_queries)] if runtime_query else None, names)
    del results
    return Trace(
        path=path,
        schema_version=str(schema),
        nsys_version=nsys_version,
        graph_mode=_graph_mode(ops),
        ops=ops,
        runtime=runtime,
        runtime_category=category,
        runtime_names=names,
        has_runtime=RUNTIME in columns,
        nvtx=nvtx,
        nvtx_names=nvtx_names,
        processes=_processes(db, tables),
        devices=_devices(db, tables),
        pytorch=_is_pytorch(db, tables, nvtx_names),
        fusible_names=_kernel_name_ids(db, columns, strings, FUSIBLE_KERNEL_MARKS, is_fusible_kernel),
        optimizer_names=_kernel_name_ids(db, columns, strings, OPTIMIZER_KERNEL_MARKS, is_optimizer_kernel),
        scaler_names=_kernel_name_ids(db, columns, strings, SCALER_KERNEL_MARKS, is_scaler_kernel),
    )


def _sorted_by_start(rows: np.ndarray) -> np.ndarray:
    """Rows in start order (in place: the rows are the reader's); exports are mostly written
    in that order already (no sort then)."""
    if not in_order(rows["start"]):
        _reorder(rows, np.argsort(rows["start"], kind="stable"))
    return rows


def _reorder(rows: np.ndarray, order: np.ndarray) -> None:
    """rows[:] = rows[order], field by field through one buffer (gathering whole records is
    several times slower, and a second array of them is as big again)."""
    buffer = np.empty(len(rows), np.int64)
    for name in rows.dtype.names:
        column = rows[name]
        through = buffer.view(column.dtype)[:len(rows)]
        np.take(column, order, out=through, mode="clip")   # no bound check: order is a permutation
        column[...] = through


_READ_OPS = np.dtype([("start", "i8"), ("end", "i8"), ("device", "i8"), ("pid", "i8"), ("corr", "i8")])


def _kernel_name_ids(db, columns: dict, strings: bool, marks: tuple, rule) -> np.ndarray:
    """The StringIds ids of the kernel short names ``rule`` accepts, sorted (read off the
    distinct strings, not the kernel rows). SQL's LIKE on ``marks`` only narrows the strings down
    (a superset: case-insensitive, and its ``_`` matches any character); ``rule`` decides alone,
    as for a Kineto trace."""
    if not strings or "shortName" not in columns.get(KERNEL, ()):
        return np.empty(0, np.int32)
    where = " OR ".join("value LIKE ?" for _ in marks)
    candidates = db.execute(f"SELECT id, value FROM StringIds WHERE {where}", [f"%{mark}%" for mark in marks]).fetchall()
    return np.array(sorted(ident for ident, name in candidates if rule(name)), np.int32)


def _op_queries(columns: dict) -> list:
    """(kind, table, sql, dtype) for the kernels, copies, memsets and graph replays; only the columns
    the analysis uses are read (the kind is the table's, a graph replay is in a graph by definition;
    a kernel's short-name id, a raw column, costs next to nothing to read: which names are fusible
    is decided once per name, not per row).
    The SQL's {rows} is where the reader puts a chunk's rowid range (advisor/columns.py)."""
    queries = []
    for kind, table in OP_TABLES:
        cols = columns.get(table)
        if not cols:
            continue
        pid = "globalPid" if "globalPid" in cols else "0"
        extra, fields = "", list(_READ_OPS.descr)
        if kind != OP_GRAPH and "graphNodeId" in cols:
            extra += ", graphNodeId IS NOT NULL AND graphNodeId != 0"
            fields.append(("in_graph", "i8"))
        if kind == OP_KERNEL and "shortName" in cols:
            extra += ", coalesce(shortName, 0)"
            fields.append(("name", "i8"))
        if kind == OP_MEMCPY and "copyKind" in cols:   # which way a copy goes: a batch's is host to device
            extra += ", coalesce(copyKind, 0)"
            fields.append(("name", "i8"))
        sql = (f"SELECT start, end, coalesce(deviceId, 0), coalesce({pid}, 0), coalesce(correlationId, 0){extra} "
               f"FROM {table} WHERE {ROWS} AND end IS NOT NULL")
        queries.append((kind, table, sql, np.dtype(fields)))
    return queries


def _rows_at_most(db, table: str):
    """How many rows ``table`` holds at most: its largest rowid (read off the b-tree's last
    page, no scan; rowids below 1 would make it no bound, which only costs speed), and never
    more than the file could hold (a row takes 8 bytes at the least: a rowid far past the row
    count must not size the arrays); None where it cannot be read."""
    try:
        largest = db.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()[0]
        size = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    except sqlite3.DatabaseError:
        return None
    if largest is None:   # an empty table
        return 0
    return min(largest, size // 8) if isinstance(largest, int) and largest > 0 else None


def _ops(queries: list, results: list, buffer, bounds: list) -> np.ndarray:
    """The operations of every table in one array, in start order. Each table's rows are in
    its region of ``buffer`` (OPS_DTYPE, the regions one after the other, as big as each
    table's bound) where they fit, else in an array of their own: the buffer is the answer
    where every region but the last is full (the largest rowid is the row count of a table
    nothing was deleted from), else the tables are put end to end."""
    for (kind, _, _, dtype), rows in zip(queries, results):
        rows["kind"] = kind
        if "in_graph" not in dtype.names:
            rows["in_graph"] = kind == OP_GRAPH
        if "name" not in dtype.names:
            rows["name"] = 0
    total = sum(len(rows) for rows in results)
    full = buffer is not None and all(np.may_share_memory(rows, buffer) for rows in results) \
        and all(len(rows) == bound for rows, bound in zip(results[:-1], bounds))
    if full:
        ops = buffer[:total] if total < len(buffer) else buffer
    else:
        ops = np.concatenate(results) if results else np.empty(0, OPS_DTYPE)
    return _sorted_by_start(ops)   # the order a stable sort of the tables end to end gives


# runtime calls the analysis uses: those that launch work (their correlationId ties them to a
# GPU operation), copy or set memory, replay a graph, or wait for the GPU; the rest (events,
# stream queries, attribute getters) are left in the file
NEEDED_CALL_PREFIXES = ("cudaMemcpy", "cudaMemset", "cuMemcpy", "cuMemset")


def _needed(name: str) -> bool:
    # every name of LAUNCH_CALLS and GRAPH_LAUNCH_CALLS holds "Launch"
    return "Launch" in name or name in SYNC_CALLS or name.startswith(NEEDED_CALL_PREFIXES)


def _call_names(db, strings: bool) -> dict:
    """name_id -> CUDA call name without its version suffix."""
    if not strings:
        return {}
    rows = db.execute("SELECT id, value FROM StringIds WHERE value LIKE 'cu%'").fetchall()
    return {ident: strip_version(value) for ident, value in rows}


def _runtime_query(columns: dict, strings: bool, names: dict):
    """(sql, dtype) of the runtime calls the analysis needs; None without a runtime table."""
    if not columns.get(RUNTIME):
        return None
    needed = sorted(ident for ident, name in names.items() if _needed(name))
    where = f" AND nameId IN ({', '.join(map(str, needed))})" if strings and needed else ""
    return (f"SELECT start, end, coalesce(globalTid, 0), coalesce(correlationId, 0), "
            f"coalesce(nameId, 0) FROM {RUNTIME} WHERE {ROWS}{where}", RUNTIME_DTYPE)


def _runtime(rows, names: dict):
    """The runtime calls in start order, and CALL_* per row."""
    if rows is None:
        return np.empty(0, RUNTIME_DTYPE), np.empty(0, np.int8)
    runtime = _sorted_by_start(rows)
    lookup_size = max(max(names, default=0), int(runtime["name_id"].max(initial=0))) + 1
    lookup = np.zeros(lookup_size, np.int8)
    for ident, name in names.items():
        if name in LAUNCH_CALLS:
            lookup[ident] = CALL_LAUNCH
        elif name in GRAPH_LAUNCH_CALLS:
            lookup[ident] = CALL_GRAPH_LAUNCH
        elif name in SYNC_CALLS:
            lookup[ident] = CALL_SYNC
    return runtime, lookup[runtime["name_id"]]


# SQLite sorts within its page cache's size (2 MB by default) and spills the rest to temporary
# files; the NVTX ranges of a million-kernel export are a few MB
SORT_MEMORY_KIB = 65536


def _read_nvtx(db, columns: dict, strings: bool):
    cols = columns.get(NVTX)
    if not cols:
        return np.empty(0, NVTX_DTYPE), []
    if "textId" in cols and strings:
        text = "coalesce(s.value, e.text)"
        join = "LEFT JOIN StringIds s ON s.id = e.textId"
    else:
        text, join = "e.text", ""
    default_cache = db.execute("PRAGMA cache_size").fetchone()[0]
    db.execute(f"PRAGMA cache_size = -{SORT_MEMORY_KIB}")   # the sort in memory, not in temporary files
    try:
        rows = db.execute(
            f"SELECT e.start, e.end, e.globalTid, e.eventType, {text} FROM {NVTX} e {join} "
            f"WHERE e.eventType IN ({NVTX_PUSH_POP}, {NVTX_START_END}) AND e.end IS NOT NULL ORDER BY e.start"
        ).fetchall()
    finally:
        db.execute(f"PRAGMA cache_size = {int(default_cache)}")
    if not rows:
        return np.empty(0, NVTX_DTYPE), []
    starts, ends, tids, types, texts = zip(*rows)
    # the names sorted and each row's index into them, as np.unique gives them, without sorting
    # every row's text: the distinct names are few
    first_seen = {}
    seen = np.fromiter((first_seen.setdefault("" if t is None else t, len(first_seen)) for t in texts),
                       np.int64, len(texts))
    names = sorted(first_seen)
    position = {name: i for i, name in enumerate(names)}
    rank = np.array([position[name] for name in first_seen], np.int64)
    nvtx = np.empty(len(rows), NVTX_DTYPE)
    for name, values in (("start", starts), ("end", ends), ("tid", tids), ("event_type", types)):
        nvtx[name] = np.array(values, dtype=np.int64)
    nvtx["name"] = rank[seen]
    return nvtx, [str(name) for name in names]


def _graph_mode(ops: np.ndarray) -> str:
    if np.any(ops["kind"] == OP_GRAPH):
        return "graph"
    if np.any(ops["in_graph"]):
        return "node"
    return "none"


def _processes(db, tables) -> dict:
    if "PROCESSES" not in tables:
        return {}
    return {int(pid): name for pid, name in db.execute("SELECT pid, name FROM PROCESSES").fetchall()}


PYTORCH_MARKS = ("%at::native::%", "%c10::%", "%at::cuda::%")


def _is_pytorch(db, tables, nvtx_names) -> bool:
    """Did a PyTorch process run here? Its kernels' names (interned in StringIds) or our ranges
    say so; scope and torch.compile advice is for PyTorch loops only."""
    if any(name.startswith("cg-advise:") for name in nvtx_names):
        return True
    if "StringIds" not in tables:
        return False
    where = " OR ".join("value LIKE ?" for _ in PYTORCH_MARKS)
    return db.execute(f"SELECT 1 FROM StringIds WHERE {where} LIMIT 1", PYTORCH_MARKS).fetchone() is not None


DEVICE_ID_COLUMNS = ("cuDevice", "id", "deviceId")   # by nsys release, newest first


def _devices(db, tables) -> dict:
    """GPU id -> name: TARGET_INFO_GPU (its id column named by release), else
    TARGET_INFO_CUDA_GPU, where some releases keep the names."""
    for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
        if table not in tables:
            continue
        columns = set(db[table].columns_dict)
        ident = next((c for c in DEVICE_ID_COLUMNS if c in columns), None)
        if ident is None or "name" not in columns:
            continue
        rows = db.execute(f"SELECT {ident}, name FROM {table}").fetchall()
        found = {int(dev): name for dev, name in rows if dev is not None and name}
        if found:
            return found
    return {}
