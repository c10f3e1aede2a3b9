"""Read-only access to a built store: SQL lists with filters, and an in-memory map of records.

The file is opened read-only, so any number of server processes can share it. Lists go through
SQLModel/SQLAlchemy (filters, counts, paging in SQL); single records and calculator lookups are
served from a dict loaded once at start-up (the store is small and never changes while open).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import func
from sqlmodel import Session, create_engine, select

from knowledge import tables as T

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

    # ------------------------------------------------------------------ reads
    def get(self, kind: str, ident: str) -> dict | None:
        return self.records.get(kind, {}).get(ident)

    def lookup(self, kind: str, ident: str) -> dict:
        """Calculators' Lookup: KeyError when unknown."""
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
