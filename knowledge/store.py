"""Read-only access to a built store: SQL lists with filters, and an in-memory map of records.

The file is opened read-only, so any number of server processes can share it. Lists are filtered, counted
and paged in SQL; single records and calculator lookups are served from a dict loaded once at start-up (the
store is small and never changes while open).

The tables are declared once, as SQLModel classes (`knowledge.tables`), which `casebook build` writes and
describes in the store itself (meta `store_schema`: each kind's table, columns and order). Reading needs
no ORM: this module speaks parameterised SQL to DuckDB directly, so a serving worker never imports
SQLAlchemy, SQLModel or the DuckDB dialect (about 50 MB of its memory).

Before a file is served it is verified (`verify_store`: the whole-file SHA-256 that `casebook build`
recorded beside it, then every row of every table read, which makes DuckDB check every data block's
checksum) and `casebook serve` serves a private copy of it (`snapshot_store`), so nothing done to the
original afterwards reaches the server.
"""
from __future__ import annotations

import hashlib
import os
import queue
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb
import orjson

from knowledge.column_cache import (
    ColumnCache,
    Columns,
    column_cache_dir,
    read_columns,
    read_store_columns,
    same_file,
)
from knowledge.loader import class_errors, gpu_prices
from knowledge.measurements import TABLES as MEASURED_TABLES
from knowledge.measurements import Measurements

KINDS = ("source", "hardware", "link", "model", "framework", "price", "case", "derivation", "glossary", "claim",
         "benchmark")
KEY = {"case": "slug"}
#: meta key under which `casebook build` describes the tables (see `store_schema`)
SCHEMA_META_KEY = "store_schema"
#: suffix of the file beside a store that holds its whole-file SHA-256 (written by `casebook build`)
CHECKSUM_SUFFIX = ".sha256"
_CHUNK_BYTES = 1 << 20


class StoreInvalid(Exception):
    """A store file that must not be served (missing, unreadable, truncated or corrupted), with the reason."""

    def __init__(self, path: Path, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class StoreCopyFailed(Exception):
    """The private copy of a store could not be written into `directory` (disk full, no such directory…): the
    original was read without fault and is not to blame, so this is no reason to rebuild it."""

    def __init__(self, directory: Path, error: OSError):
        self.directory = Path(directory)
        self.error = error
        self.reason = f"cannot write the private copy into {directory}: {error.strerror or error}"
        super().__init__(self.reason)


class StoreUnavailable(Exception):
    """An open store that can no longer be read (its file damaged or changed under the server, or DuckDB gave
    up on it), with the reason: the service cannot answer from it until it is restarted on a sound store."""

    def __init__(self, path: Path, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{path}: {reason}")


@dataclass(frozen=True)
class StoreCheck:
    """What verifying a store file found: its identity and how much of it was read."""
    path: Path
    sha256: str
    content_hash: str
    tables: int
    rows: int


def checksum_path(db: Path) -> Path:
    """The file beside `db` where `casebook build` records the store's whole-file SHA-256."""
    db = Path(db)
    return db.with_name(db.name + CHECKSUM_SUFFIX)


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


def recorded_checksums(db: Path) -> set[str]:
    """The SHA-256 digests recorded beside `db` (empty when there is no record). While a build swaps files
    the record briefly holds the old and the new digest, so either file is accepted during the swap."""
    try:
        text = checksum_path(db).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError):
        return set()
    return {line.split()[0] for line in text.splitlines() if line.strip()}


def verify_store(path: Path, digest: str | None = None, accepted: set[str] | None = None,
                 record: Path | None = None) -> StoreCheck:
    """Check that a store file can be served: its SHA-256 (`digest`, computed when None) is one of the
    `accepted` digests when any are recorded (in `record`, named in the message; default: beside `path`),
    it opens read-only, has every table and a content hash, and every row of every table reads back
    (DuckDB verifies each block's checksum as it reads it). Raises StoreInvalid with the reason otherwise."""
    path = Path(path)
    if not path.is_file():
        raise StoreInvalid(path, "the store file does not exist")
    try:
        digest = digest or file_sha256(path)
    except OSError as exc:
        raise StoreInvalid(path, f"cannot be read: {exc}") from exc
    # a checksum mismatch is reported after the read, which names the damage when it finds it (truncation…)
    mismatch = bool(accepted) and digest not in accepted
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        raise StoreInvalid(path, f"not a readable DuckDB store: {_first_line(exc)}") from exc
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY table_name").fetchall()]
        if "meta" not in names:
            raise StoreInvalid(path, "tables missing: meta")
        row = con.execute("SELECT value FROM meta WHERE key = 'content_hash'").fetchone()
        if not row or not row[0]:
            raise StoreInvalid(path, "no content hash in table meta: not written by `casebook build`")
        described = con.execute("SELECT value FROM meta WHERE key = ?", [SCHEMA_META_KEY]).fetchone()
        if not described or not described[0]:
            raise StoreInvalid(path, f"no {SCHEMA_META_KEY} in table meta: written by an older `casebook build`")
        schema = orjson.loads(described[0])
        missing = sorted(set(schema["tables"]) - set(names))
        missing_kinds = sorted(set(KINDS) - set(schema["kinds"]))
        if missing or missing_kinds:
            raise StoreInvalid(path, "tables missing: " + ", ".join(missing + [f"(kind {k})" for k in missing_kinds]))
        rows = 0
        for name in names:
            cols = [r[0] for r in con.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' "
                                              "AND table_name = ? ORDER BY ordinal_position", [name]).fetchall()]
            # hashing every column forces every value (and so every block) to be read and checked
            folds = ", ".join(f'bit_xor(hash("{c}"))' for c in cols)
            try:
                rows += con.execute(f'SELECT count(*), {folds} FROM "{name}"').fetchone()[0]
            except duckdb.Error as exc:
                raise StoreInvalid(path, f"table {name} cannot be read: {_first_line(exc)}") from exc
        if mismatch:
            raise StoreInvalid(path, f"file checksum sha256:{digest[:16]}… does not match the one `casebook build` "
                                     f"recorded in {(record or checksum_path(path)).name}: the file was changed or damaged after it was built")
        return StoreCheck(path, digest, row[0], len(names), rows)
    except duckdb.Error as exc:
        raise StoreInvalid(path, f"cannot be read: {_first_line(exc)}") from exc
    finally:
        con.close()


def snapshot_store(db: Path, directory: Path) -> StoreCheck:
    """Copy `db` into `directory` (private to one server), verify the copy and make it read-only; the copy is
    named by its content hash. Reading the original through one open file means a build that replaces it
    meanwhile yields either the whole old or the whole new file, never a mix. Raises StoreInvalid when the
    original cannot be read or served, StoreCopyFailed when the copy cannot be written (a full disk is not a
    damaged store)."""
    db, directory = Path(db), Path(directory)
    incoming = directory / "incoming.duckdb"
    accepted = recorded_checksums(db)          # read before and after the copy: see recorded_checksums
    h = hashlib.sha256()
    try:
        src = open(db, "rb")
    except FileNotFoundError as exc:
        raise StoreInvalid(db, "the store file does not exist") from exc
    except OSError as exc:
        raise StoreInvalid(db, f"cannot be read: {exc}") from exc
    try:
        with src:
            try:
                dst = open(incoming, "wb")
            except OSError as exc:
                raise StoreCopyFailed(directory, exc) from exc
            try:
                with dst:
                    while True:
                        try:
                            chunk = src.read(_CHUNK_BYTES)
                        except OSError as exc:
                            raise StoreInvalid(db, f"cannot be read: {exc}") from exc
                        if not chunk:
                            break
                        h.update(chunk)
                        dst.write(chunk)
            except OSError as exc:             # a write, or the flush when the copy is closed
                raise StoreCopyFailed(directory, exc) from exc
    except BaseException:
        incoming.unlink(missing_ok=True)
        raise
    accepted |= recorded_checksums(db)
    try:
        check = verify_store(incoming, h.hexdigest(), accepted, record=checksum_path(db))
    except StoreInvalid as exc:
        incoming.unlink(missing_ok=True)
        raise StoreInvalid(db, exc.reason) from exc
    final = directory / f"casebook-{check.content_hash[:16]}.duckdb"
    try:
        os.replace(incoming, final)
        final.chmod(0o444)
    except OSError as exc:
        incoming.unlink(missing_ok=True)
        raise StoreCopyFailed(directory, exc) from exc
    return StoreCheck(final, check.sha256, check.content_hash, check.tables, check.rows)


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (DuckDB's carry long hints below it)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


@dataclass
class Page:
    items: list[dict]
    total: int
    limit: int
    offset: int


#: DuckDB for a small read-only store served by several worker processes: one thread each (the workers
#: are the parallelism) and a bounded buffer pool, so scans of the measured tables cannot grow a worker.
#: Set on each connection after it opens (not as connect-time config: DuckDB refuses a second connection to a
#: file with another config in the same process, so every reader of the file opens it the same way).
DUCKDB_SETTINGS = ("SET threads = 1", "SET memory_limit = '256MB'")
#: idle cursors kept per store (more are opened under load and closed when returned)
CURSOR_POOL = 8


@dataclass(frozen=True)
class KindTable:
    """Where the records of one kind live: the table, its columns (`doc` excluded) and its default order."""
    table: str
    key: str
    columns: tuple[str, ...]
    order: tuple[str, ...]


def quote_identifier(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _like_escape(text: str) -> str:
    """`text` for a LIKE pattern in which `%`, `_` and the escape character `\\` match themselves."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


#: DuckDB errors that mean the file (or DuckDB's hold on it) is broken, not the statement: reading a block failed
#: (IO), its checksum did not match ("Corrupt database file", raised as the base class), or DuckDB invalidated the
#: database after a fatal or internal error (every later statement fails too)
_DAMAGE = (duckdb.IOException, duckdb.FatalException, duckdb.InternalException)
_DAMAGE_TEXT = ("Corrupt database", "database has been invalidated")


def is_damage(exc: BaseException) -> bool:
    """Whether a DuckDB error says the store cannot be read (rather than that a statement was wrong)."""
    return isinstance(exc, duckdb.Error) and (isinstance(exc, _DAMAGE) or type(exc) is duckdb.Error
                                              or any(t in str(exc) for t in _DAMAGE_TEXT))


#: seconds between the real queries of `Store.health` (the file check runs every time)
HEALTH_QUERY_S = 1.0


def _file_identity(st: os.stat_result) -> tuple[int, int]:
    """What changes when anything writes to a file: its size and modification time."""
    return st.st_size, st.st_mtime_ns


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        #: why the store cannot be read any more (the first damage seen), None while it can (see `health`)
        self.failure: str | None = None
        #: why an older store is served than the data files describe (set by whoever opened it), None when current
        self.stale_reason: str | None = None
        self._queried_at = -HEALTH_QUERY_S
        # One read-only database per process; each thread borrows a cursor (DuckDB's connection to the same
        # database) from a small pool: opening the file per request costs more than the query.
        self._con = duckdb.connect(str(self.path), read_only=True)
        # the file DuckDB opened, held so `health` sees any write to it (a rename or unlink of the path does not
        # touch what is served)
        try:
            self._fd: int | None = os.open(self.path, os.O_RDONLY)
            self._identity = _file_identity(os.fstat(self._fd))
        except OSError:
            self._fd = None
        for statement in DUCKDB_SETTINGS:
            self._con.execute(statement)
        self._cursors: queue.SimpleQueue = queue.SimpleQueue()
        self._cursor_lock = threading.Lock()
        self.records: dict[str, dict[str, dict]] = {}
        self.meta: dict[str, str] = {}
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ health
    def _fail(self, reason: str) -> StoreUnavailable:
        """Remember the first reason the store cannot be read; the exception to raise."""
        if self.failure is None:
            self.failure = reason
        return StoreUnavailable(self.path, self.failure)

    def health(self) -> str | None:
        """Why the store cannot be served now, or None when it can: the file DuckDB reads must be unchanged since
        it was opened (any write to a served store is damage), no read may have failed, and one real query must
        answer (the content hash from table `meta`). Cheap: an fstat, and a one-row query at most every
        HEALTH_QUERY_S (so a flood of health checks costs no more than one query a second)."""
        if self.failure is None and self._fd is not None:
            try:
                now = _file_identity(os.fstat(self._fd))
            except OSError as exc:
                self._fail(f"the store file cannot be inspected: {exc}")
            else:
                if now != self._identity:
                    size = f", size {self._identity[0]} -> {now[0]} bytes" if now[0] != self._identity[0] else ""
                    self._fail(f"the store file was written to after it was opened (modified{size}): it can no "
                               "longer be trusted")
        if self.failure is None and time.monotonic() - self._queried_at >= HEALTH_QUERY_S:
            self._queried_at = time.monotonic()
            try:
                row = self._sql("SELECT value FROM meta WHERE key = 'content_hash'")
            except StoreUnavailable:
                pass
            except duckdb.Error as exc:
                self._fail(f"the store does not answer: {_first_line(exc)}")
            else:
                if not row or row[0][0] != self.content_hash:
                    self._fail("the store's content hash no longer reads back as it was opened")
        return self.failure

    # ------------------------------------------------------------------ SQL
    @contextmanager
    def _cursor(self, writes_to: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of this thread's own for the duration of a block, returned to the pool after it. A DuckDB error
        that says the store cannot be read is raised as StoreUnavailable (and remembered, see `health`), except
        an error about `writes_to`, a file the block writes (a full disk there is not a damaged store)."""
        try:
            cur = self._cursors.get_nowait()
        except queue.Empty:
            with self._cursor_lock:
                cur = self._con.cursor()
        try:
            yield cur
        except duckdb.Error as exc:
            if is_damage(exc) and not (writes_to and writes_to in str(exc)):
                raise self._fail(f"the store cannot be read: {_first_line(exc)}") from exc
            raise
        finally:
            if self._cursors.qsize() < CURSOR_POOL:
                self._cursors.put(cur)
            else:
                cur.close()

    def _sql(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        """Rows of one read-only SQL statement (`?` parameters)."""
        with self._cursor() as cur:
            return cur.execute(sql, params or []).fetchall()

    def copy_to(self, select: str, target: Path, options: str) -> None:
        """`COPY (select) TO target (options)`: DuckDB writes a query's rows to a file. Raises OSError when the file
        cannot be written (DuckDB's IO error, errno kept when it names one), StoreUnavailable when the store cannot
        be read."""
        target_text = str(target)
        literal = target_text.replace("'", "''")
        try:
            with self._cursor(writes_to=target_text) as cur:
                cur.execute(f"COPY ({select}) TO '{literal}' ({options})")
        except duckdb.IOException as exc:
            text = _first_line(exc)
            found = re.search(r'"errno"\s*:\s*"?(\d+)', str(exc))
            code = int(found.group(1)) if found else 0
            raise OSError(code, os.strerror(code) if code else text, target_text) from exc

    def _dicts(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of one read-only SQL statement as dicts keyed by column name."""
        with self._cursor() as cur:
            cur.execute(sql, params or [])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        self.meta = {k: v for k, v in self._sql("SELECT key, value FROM meta")}
        described = self.meta.get(SCHEMA_META_KEY)
        if not described:
            raise StoreInvalid(self.path, f"no {SCHEMA_META_KEY} in table meta: written by an older `casebook build`")
        self.schema: dict[str, KindTable] = {
            kind: KindTable(d["table"], d["key"], tuple(d["columns"]), tuple(d["order"]))
            for kind, d in orjson.loads(described)["kinds"].items()}
        for kind in KINDS:
            t = self.schema[kind]
            order = ", ".join(quote_identifier(c) for c in t.order)
            rows = self._sql(f"SELECT doc FROM {quote_identifier(t.table)} ORDER BY {order}")
            docs = [orjson.loads(r[0]) for r in rows]
            self.records[kind] = {d[t.key]: d for d in docs}
        self._by_case: dict[str, list[dict]] = {}
        for d in self.records["derivation"].values():
            self._by_case.setdefault(d["case"], []).append(d)
        self._load_measurements()

    def _load_measurements(self) -> None:
        """The manifest of the measured tables and the columns of each `measured_<table>` (rows stay in SQL)."""
        self.measurement_files: list[dict[str, Any]] = []
        for f in self._dicts("SELECT * FROM measurement_file ORDER BY path"):
            f["table"] = f.pop("table_name")
            f["columns"] = f["columns"].split(",") if f["columns"] else []
            self.measurement_files.append(f)
        self.measurement_header: dict[str, Any] = orjson.loads(self.meta.get("measurement_manifest") or "{}")
        systems = orjson.loads(self.meta.get("measurement_systems") or "{}")
        self.measured_columns: dict[str, list[str]] = {}
        for table in MEASURED_TABLES:
            cols = self._sql("SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                             "ORDER BY ordinal_position", [f"measured_{table}"])
            if cols:
                self.measured_columns[table] = [c[0] for c in cols]
        self.measurements = Measurements(self.measurement_files, systems, self._measured_file_columns,
                                         ColumnCache(column_cache_dir(self.path)))

    def _measured_file_columns(self, f: dict[str, Any]) -> Columns:
        """One measured file's own columns (text dictionary-encoded), rows in file order, for the column cache
        beside the store (`knowledge.column_cache`), which then maps them. Read through a DuckDB instance of its
        own, closed right after, so that the blocks read are not kept in this store's buffer pool (through this
        store's connection when its path may name another file now)."""
        table = f"measured_{f['table']}"
        if same_file(self.path, self._fd):
            cols = read_store_columns(self.path, table, f)
            if same_file(self.path, self._fd):
                return cols
        with self._cursor() as cur:
            return read_columns(cur, f"{table} WHERE file = ?", [f["path"]], f["columns"], "rowid")

    def measured_distinct(self, table: str, column: str, limit: int = 100) -> list[Any]:
        """The values one column of `measured_<table>` takes (sorted, at most `limit`; cached)."""
        key = (table, column)
        cache = self.__dict__.setdefault("_distinct", {})
        if key not in cache:
            if column not in self.measured_columns.get(table, []):
                raise KeyError(column)
            cache[key] = [r[0] for r in self._sql(f'SELECT DISTINCT "{column}" FROM measured_{table} '
                                                 f'WHERE "{column}" IS NOT NULL ORDER BY 1 LIMIT ?', [limit])]
        return cache[key]

    def measured_page(self, table: str, where: dict[str, Any], limit: int = 50, offset: int = 0) -> Page:
        """A page of rows of `measured_<table>`: `where` maps a column (or `framework_dir`, the file's
        framework folder) to an exact value, text case-insensitively. Rows in file order. KeyError for an
        unknown table or column."""
        columns = self.measured_columns[table]
        conds, params = [], []
        for col, value in where.items():
            if value is None:
                continue
            if col == "framework_dir":
                conds.append("file IN (SELECT path FROM measurement_file WHERE lower(framework) = lower(?))")
            elif col not in columns:
                raise KeyError(col)
            elif isinstance(value, str):
                conds.append(f'lower("{col}") = lower(?)')
            else:
                conds.append(f'"{col}" = ?')
            params.append(value)
        clause = (" WHERE " + " AND ".join(conds)) if conds else ""
        total = self._sql(f"SELECT count(*) FROM measured_{table}{clause}", params)[0][0]
        rows = self._sql(f"SELECT * FROM measured_{table}{clause} ORDER BY file, rowid LIMIT ? OFFSET ?",
                         [*params, limit, offset])
        return Page([dict(zip(columns, r)) for r in rows], int(total), limit, offset)

    def measured_fits(self, system: str | None = None, table: str | None = None, gpus: int | None = None,
                      limit: int = 100, offset: int = 0) -> Page:
        """A page of the stored α–β fits of the measured all-reduces (`measured_fit`), filtered exactly
        (text case-insensitively), ordered by system, table and GPU count. Each item names its `table`."""
        conds, params = [], []
        for col, value in (("system", system), ("table_name", table)):
            if value is not None:
                conds.append(f"lower({col}) = ?")
                params.append(value.lower())
        if gpus is not None:
            conds.append("gpus = ?")
            params.append(gpus)
        clause = (" WHERE " + " AND ".join(conds)) if conds else ""
        total = self._sql(f"SELECT count(*) FROM measured_fit{clause}", params)[0][0]
        rows = self._dicts(f"SELECT * FROM measured_fit{clause} ORDER BY system, table_name, gpus LIMIT ? OFFSET ?",
                           [*params, limit, offset])
        items = [{("table" if c == "table_name" else c): v for c, v in r.items()} for r in rows]
        return Page(items, int(total), limit, offset)

    def fits_of(self, system: str, table: str) -> list[dict]:
        """Every stored fit of one measured system's table, by GPU count."""
        return self.measured_fits(system, table, limit=1000).items

    @property
    def content_hash(self) -> str:
        return self.meta.get("content_hash", "")

    @cached_property
    def coverage(self) -> dict:
        """How much of the book's arithmetic is bound and checked (`knowledge.coverage`), audited once:
        an open store never changes, and the audit of every worked example is not free."""
        from knowledge.coverage import coverage
        return coverage(self.all("case"), self.all("derivation"))

    @cached_property
    def serving_calibration(self) -> dict[str, dict]:
        """serving-estimate's applied efficiency factors, fitted on this store's benchmarks (`knowledge.validation`;
        read from the report persisted beside the store, computed there the first time)."""
        from knowledge.serving_calibration import applied
        from knowledge.validation import store_factors
        return applied(store_factors(self))

    @cached_property
    def validation_rows(self) -> list[dict]:
        """The rows of this store's validation report (`knowledge.validation.cached_report`, read from its persisted
        copy or computed on a thread of its own as for the calibration factors; [] when it cannot be had)."""
        from knowledge.validation import cached_report
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["rows"] = cached_report(self)["rows"]
            except Exception:      # noqa: BLE001 - no class errors rather than a failed calculation
                box["rows"] = []
        t = threading.Thread(target=work, name="casebook-validation-rows", daemon=True)
        t.start()
        t.join()
        return box.get("rows", [])

    # ------------------------------------------------------------------ reads
    def get(self, kind: str, ident: str) -> dict | None:
        return self.records.get(kind, {}).get(ident)

    def lookup(self, kind: str, ident: str) -> Any:
        """Calculators' Lookup: KeyError when unknown. Kind "measurement" answers "index", "systems" and
        "<system>/<table>" (columns as NumPy arrays, loaded once; see `knowledge.measurements`); kind
        "gpu_prices" answers the GPU-hour price records of a hardware id (a list, possibly empty); kind
        "validation_class" the validation errors on one "<hardware>/<framework>" (`knowledge.loader.class_errors`
        over the persisted validation report's rows); kind "serving_calibration" the fitted factor of "<hardware>/<framework or *>/<basis>"
        (`knowledge.serving_calibration`, from the validation report persisted beside the store); kind "ids"
        lists the ids of the kind named by `ident`."""
        if kind == "measurement":
            return self.measurements.lookup(ident)
        if kind == "gpu_prices":
            return gpu_prices(self.records.get("price", {}).values(), ident)
        if kind == "serving_calibration":     # KeyError: no factor for this hardware × framework × basis
            return self.serving_calibration[ident]
        if kind == "validation_class":      # serving-estimate's errors on one hardware/framework's published runs
            return class_errors(ident, self.validation_rows)
        if kind == "ids":            # the ids of one kind, so an unknown id is answered with the closest
            return list(self.records.get(ident, {}))
        return self.records[kind][ident]

    def derivations_of(self, slug: str) -> list[dict]:
        """The worked examples of one case, in store order (indexed once at start-up)."""
        return list(self._by_case.get(slug, []))

    def all(self, kind: str) -> list[dict]:
        return list(self.records.get(kind, {}).values())

    def count(self, kind: str) -> int:
        return len(self.records.get(kind, {}))

    def list(self, kind: str, where: dict[str, Any] | None = None, limit: int = 50, offset: int = 0,
             sort: str | None = None, descending: bool = False, contains: dict[str, str] | None = None) -> Page:
        """A page of records filtered in SQL. `where`: column -> exact value (case-insensitive for text);
        `contains`: column -> substring (`%` and `_` match themselves). Unknown columns are a programming
        error (KeyError)."""
        t = self.schema[kind]

        def column(name: str) -> str:
            if name not in t.columns:
                raise KeyError(name)
            return quote_identifier(name)

        conds, params = [], []
        for col, value in (where or {}).items():
            if value is None:
                continue
            if isinstance(value, str):
                conds.append(f"lower({column(col)}) = ?")
                params.append(value.lower())
            else:
                conds.append(f"{column(col)} = ?")
                params.append(value)
        for col, value in (contains or {}).items():
            if value:
                conds.append(f"lower({column(col)}) LIKE ? ESCAPE '\\'")
                params.append("%" + _like_escape(value.lower()) + "%")
        order = [f"{column(sort)} {'DESC' if descending else 'ASC'} NULLS LAST"] if sort else []
        order += [quote_identifier(c) for c in t.order]
        clause = (" WHERE " + " AND ".join(conds)) if conds else ""
        total = self._sql(f"SELECT count(*) FROM {quote_identifier(t.table)}{clause}", params)[0][0]
        rows = self._sql(f"SELECT doc FROM {quote_identifier(t.table)}{clause} ORDER BY {', '.join(order)} LIMIT ? OFFSET ?",
                         [*params, limit, offset])
        return Page([orjson.loads(r[0]) for r in rows], int(total), limit, offset)

    def columns(self, kind: str) -> list[str]:
        """The filter and sort columns of one kind's table, in declaration order (`doc` excluded)."""
        return list(self.schema[kind].columns)

    def peaks(self, hardware_id: str) -> list[dict]:
        return self._dicts("SELECT * FROM hardware_peak WHERE hardware_id = ?", [hardware_id])

    def facts_from_source(self, source_id: str) -> list[dict]:
        return self._dicts("SELECT * FROM fact WHERE source_id = ? ORDER BY kind, record_id, field", [source_id])

    def fact_counts(self) -> dict[str, int]:
        return {k: int(n) for k, n in self._sql("SELECT kind, count(*) FROM fact GROUP BY kind")}

    def close(self) -> None:
        while True:
            try:
                self._cursors.get_nowait().close()
            except queue.Empty:
                break
        self._con.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
