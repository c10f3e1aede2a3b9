"""Read-only access to a built store: SQL lists with filters, and an in-memory map of records.

The file is opened read-only, so any number of server processes can share it. Lists go through
SQLModel/SQLAlchemy (filters, counts, paging in SQL); single records and calculator lookups are
served from a dict loaded once at start-up (the store is small and never changes while open).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from sqlalchemy import func
from sqlmodel import Session, create_engine, select

from knowledge import tables as T
from knowledge.loader import gpu_prices
from knowledge.measurements import TABLES as MEASURED_TABLES
from knowledge.measurements import Measurements

KINDS = ("source", "hardware", "link", "model", "framework", "price", "case", "derivation", "glossary", "claim")
KEY = {"case": "slug"}


@dataclass
class Page:
    items: list[dict]
    total: int
    limit: int
    offset: int


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        # A small pool of read-only connections: opening the file per request costs more than the query.
        self.engine = create_engine(f"duckdb:///{self.path}", connect_args={"read_only": True},
                                    pool_size=4, max_overflow=8, pool_pre_ping=False)
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
                conds.append(func.lower(getattr(table, col)).contains(value.lower()))
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
