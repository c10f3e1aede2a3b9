"""Read-only access to a built store: SQL lists with filters, and an in-memory map of records.

The file is opened read-only, so any number of server processes can share it. Lists go through
SQLModel/SQLAlchemy (filters, counts, paging in SQL); single records and calculator lookups are
served from a dict loaded once at start-up (the store is small and never changes while open).

Before a file is served it is verified (`verify_store`: the whole-file SHA-256 that `casebook build`
recorded beside it, then every row of every table read, which makes DuckDB check every data block's
checksum) and `casebook serve` serves a private copy of it (`snapshot_store`), so nothing done to the
original afterwards reaches the server.
"""
from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from sqlalchemy import event, func
from sqlmodel import Session, create_engine, select

from knowledge import tables as T
from knowledge.loader import gpu_prices
from knowledge.measurements import TABLES as MEASURED_TABLES
from knowledge.measurements import Measurements

KINDS = ("source", "hardware", "link", "model", "framework", "price", "case", "derivation", "glossary", "claim")
KEY = {"case": "slug"}
#: suffix of the file beside a store that holds its whole-file SHA-256 (written by `casebook build`)
CHECKSUM_SUFFIX = ".sha256"
_CHUNK_BYTES = 1 << 20


class StoreInvalid(Exception):
    """A store file that must not be served (missing, unreadable, truncated or corrupted), with the reason."""

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
    import duckdb

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
        missing = sorted({t.__tablename__ for t in T.ALL_TABLES} - set(names))
        if missing:
            raise StoreInvalid(path, f"tables missing: {', '.join(missing)}")
        row = con.execute("SELECT value FROM meta WHERE key = 'content_hash'").fetchone()
        if not row or not row[0]:
            raise StoreInvalid(path, "no content hash in table meta: not written by `casebook build`")
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
    meanwhile yields either the whole old or the whole new file, never a mix. Raises StoreInvalid."""
    db, directory = Path(db), Path(directory)
    incoming = directory / "incoming.duckdb"
    accepted = recorded_checksums(db)          # read before and after the copy: see recorded_checksums
    h = hashlib.sha256()
    try:
        with open(db, "rb") as src, open(incoming, "wb") as dst:
            while chunk := src.read(_CHUNK_BYTES):
                h.update(chunk)
                dst.write(chunk)
    except FileNotFoundError as exc:
        raise StoreInvalid(db, "the store file does not exist") from exc
    except OSError as exc:
        incoming.unlink(missing_ok=True)
        raise StoreInvalid(db, f"cannot be read: {exc}") from exc
    accepted |= recorded_checksums(db)
    try:
        check = verify_store(incoming, h.hexdigest(), accepted, record=checksum_path(db))
    except StoreInvalid as exc:
        incoming.unlink(missing_ok=True)
        raise StoreInvalid(db, exc.reason) from exc
    final = directory / f"casebook-{check.content_hash[:16]}.duckdb"
    os.replace(incoming, final)
    final.chmod(0o444)
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


def _tune_connection(dbapi_connection: Any, _record: Any) -> None:
    """Apply DUCKDB_SETTINGS to a freshly opened pool connection."""
    for statement in DUCKDB_SETTINGS:
        dbapi_connection.execute(statement)


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        # A small pool of read-only connections: opening the file per request costs more than the query.
        self.engine = create_engine(f"duckdb:///{self.path}", connect_args={"read_only": True},
                                    pool_size=4, max_overflow=8, pool_pre_ping=False)
        event.listen(self.engine, "connect", _tune_connection)
        self._local = threading.local()
        self.records: dict[str, dict[str, dict]] = {}
        self.meta: dict[str, str] = {}
        self._load()

    # ------------------------------------------------------------------ loading
    def _load(self) -> None:
        with Session(self.engine) as s:
            for kind in KINDS:
                table = T.TABLES[kind]
                key = getattr(table, KEY.get(kind, "id"))
                rows = s.exec(select(table.doc).order_by(*self._default_order(kind) or [key])).all()
                docs = [orjson.loads(r) for r in rows]
                self.records[kind] = {d[KEY.get(kind, "id")]: d for d in docs}
            self.meta = {m.key: m.value for m in s.exec(select(T.Meta)).all()}
        self._by_case: dict[str, list[dict]] = {}
        for d in self.records["derivation"].values():
            self._by_case.setdefault(d["case"], []).append(d)
        self._load_measurements()

    def _load_measurements(self) -> None:
        """The manifest of the measured tables and the columns of each `measured_<table>` (rows stay in SQL)."""
        with Session(self.engine) as s:
            rows = s.exec(select(T.MeasurementFile).order_by(T.MeasurementFile.path)).all()
        self.measurement_files: list[dict[str, Any]] = []
        for r in rows:
            f = r.model_dump()
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
        self.measurements = Measurements(self.measurement_files, systems, self._measured_file_columns)

    def _sql(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        """Rows of one read-only SQL statement on a pooled connection (`?` parameters)."""
        raw = self.engine.raw_connection()
        try:
            return raw.driver_connection.execute(sql, params or []).fetchall()
        finally:
            raw.close()

    def _measured_file_columns(self, f: dict[str, Any]) -> dict[str, np.ndarray]:
        """One measured file's own columns as NumPy arrays, rows in file order."""
        cols = ", ".join(f'"{c}"' for c in f["columns"])
        raw = self.engine.raw_connection()
        try:
            cur = raw.driver_connection.execute(
                f"SELECT {cols} FROM measured_{f['table']} WHERE file = ? ORDER BY rowid", [f["path"]])
            return dict(cur.fetchnumpy())
        finally:
            raw.close()

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
        t = T.MeasuredFit
        conds = [func.lower(col) == value.lower() for col, value in ((t.system, system), (t.table_name, table))
                 if value is not None]
        if gpus is not None:
            conds.append(t.gpus == gpus)
        with Session(self.engine) as s:
            total = s.exec(select(func.count()).select_from(t).where(*conds)).one()
            rows = s.exec(select(t).where(*conds).order_by(t.system, t.table_name, t.gpus).offset(offset).limit(limit)).all()
        items = [{("table" if c == "table_name" else c): getattr(r, c) for c in t.model_fields} for r in rows]
        return Page(items, int(total), limit, offset)

    def fits_of(self, system: str, table: str) -> list[dict]:
        """Every stored fit of one measured system's table, by GPU count."""
        return self.measured_fits(system, table, limit=1000).items

    def _default_order(self, kind: str):
        t = T.TABLES[kind]
        if kind == "case":
            return [t.section_order, t.slug]
        if kind == "derivation":
            return [t.case_slug, t.id]
        return None

    @property
    def content_hash(self) -> str:
        return self.meta.get("content_hash", "")

    @cached_property
    def coverage(self) -> dict:
        """How much of the book's arithmetic is bound and checked (`knowledge.coverage`), audited once:
        an open store never changes, and the audit of every worked example is not free."""
        from knowledge.coverage import coverage
        return coverage(self.all("case"), self.all("derivation"))

    # ------------------------------------------------------------------ reads
    def get(self, kind: str, ident: str) -> dict | None:
        return self.records.get(kind, {}).get(ident)

    def lookup(self, kind: str, ident: str) -> Any:
        """Calculators' Lookup: KeyError when unknown. Kind "measurement" answers "index", "systems" and
        "<system>/<table>" (columns as NumPy arrays, loaded once; see `knowledge.measurements`); kind
        "gpu_prices" answers the GPU-hour price records of a hardware id (a list, possibly empty); kind "ids"
        lists the ids of the kind named by `ident`."""
        if kind == "measurement":
            return self.measurements.lookup(ident)
        if kind == "gpu_prices":
            return gpu_prices(self.records.get("price", {}).values(), ident)
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
        `contains`: column -> substring. Unknown columns are a programming error (KeyError)."""
        table = T.TABLES[kind]
        key_name = KEY.get(kind, "id")
        conds = []
        for col, value in (where or {}).items():
            if value is None:
                continue
            column = getattr(table, col)
            if isinstance(value, str):
                conds.append(func.lower(column) == value.lower())
            else:
                conds.append(column == value)
        for col, value in (contains or {}).items():
            if value:
                # autoescape: `%`, `_` and the escape character itself match literally (`q=%` is not "anything")
                conds.append(func.lower(getattr(table, col)).contains(value.lower(), autoescape=True))
        order = []
        if sort:
            column = getattr(table, sort)
            order.append(column.desc().nulls_last() if descending else column.asc().nulls_last())
        order += self._default_order(kind) or [getattr(table, key_name)]
        with Session(self.engine) as s:
            total = s.exec(select(func.count()).select_from(table).where(*conds)).one()
            rows = s.exec(select(table.doc).where(*conds).order_by(*order).offset(offset).limit(limit)).all()
        return Page([orjson.loads(r) for r in rows], int(total), limit, offset)

    def columns(self, kind: str) -> list[str]:
        return [c for c in T.TABLES[kind].model_fields if c != "doc"]

    def peaks(self, hardware_id: str) -> list[dict]:
        with Session(self.engine) as s:
            rows = s.exec(select(T.HardwarePeak).where(T.HardwarePeak.hardware_id == hardware_id)).all()
        return [r.model_dump() for r in rows]

    def facts_from_source(self, source_id: str) -> list[dict]:
        with Session(self.engine) as s:
            rows = s.exec(select(T.Fact).where(T.Fact.source_id == source_id).order_by(T.Fact.kind, T.Fact.record_id, T.Fact.field)).all()
        return [r.model_dump() for r in rows]

    def fact_counts(self) -> dict[str, int]:
        with Session(self.engine) as s:
            rows = s.exec(select(T.Fact.kind, func.count()).group_by(T.Fact.kind)).all()
        return {k: int(n) for k, n in rows}

    def close(self) -> None:
        self.engine.dispose()
