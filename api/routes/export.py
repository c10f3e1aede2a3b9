"""The data, downloadable: every table of the store as CSV and Parquet, and the built DuckDB file itself.

`GET /api/v1/export` lists every kind (rows, columns with types, URLs, the store's content hash, licence and
provenance); `GET /api/v1/export/{kind}.csv` and `.parquet` answer one table, `GET /api/v1/export/casebook.duckdb`
the built store. Every download carries the store's content hash as its `ETag` and in `X-Content-Hash` (so
`If-None-Match` answers 304) and a file name with the short hash.

The files are written by DuckDB itself (`COPY (SELECT …) TO …`) on a read-only connection of the store, once per
content hash, into a cache directory outside the store's folder (`CASEBOOK_EXPORT_DIR`, default
`$XDG_CACHE_HOME/casebook/export`, else a private temporary directory), then streamed from there. A file appears
under its final name only complete (written to a temporary name, then renamed), so several server processes may
share the directory. Nested values are JSON text in CSV (the `doc` column is each record as stored, with the source
and locator of every number); Parquet keeps DuckDB's types.

When no cache directory can take a file (the disk is full, the folder cannot be made), the configured one and then a
private temporary one having failed, a CSV download is streamed straight from the store instead (the same bytes,
`X-Export-Source: store`) and a Parquet download answers 503 with the reason; the write is tried again after
RETRY_WRITE_S. A store that cannot be read answers 503 as well (`knowledge.store.StoreUnavailable`).
"""
from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.responses import FileResponse, Response, StreamingResponse

from api.problems import problem
from api.responses import FastJSONResponse
from api.urls import COLLECTIONS, urls
from calculators.framework.suggest import close_matches, phrase
from knowledge.store import KindTable, Store
from knowledge.store import quote_identifier as _q

router = APIRouter(tags=["export"])
log = logging.getLogger("casebook")

#: bump when the files written for one content hash change shape (the cache key holds it)
EXPORT_VERSION = "1"
#: download format -> (media type, file suffix)
FORMATS: dict[str, str] = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}
DUCKDB_MEDIA_TYPE = "application/octet-stream"
#: the name of the built store among the downloads (`/api/v1/export/casebook.duckdb`)
DATABASE = "casebook"
CACHE_CONTROL = "public, max-age=300"
SHORT = 12
#: seconds before a file that could not be written to the cache is tried again (each try writes until it fails)
RETRY_WRITE_S = 30.0
#: rows per chunk of a CSV streamed from the store
STREAM_ROWS = 10_000

LICENCE = ("The casebook's own compilation (code MIT, like the service). Every number inside a record's `doc` names "
           "its source and locator (see the `sources` download); the figures belong to those sources, so reuse "
           "follows their terms.")
BOOK = ("Case titles as in the index of bojieli/ai-infra-book (`case-studies/`; see that repository for its "
        "license); summaries and derivation notes are the casebook's own words.")
DERIVED_FITS = ("Derived by the casebook at build time from the measured all-reduce tables (Apache-2.0, NVIDIA "
                "aiconfigurator-core): each row names the measured file and its sha256, and the fitting method.")


@dataclass(frozen=True)
class Kind:
    """One downloadable table: its URL name, the SELECT that produces it, and what it is."""

    name: str
    table: str
    select: str
    title: str
    description: str
    licence: str
    page: str | None = None
    api: str | None = None


def _record_kind(kind: str, table: KindTable, stored: list[str]) -> Kind:
    """A record table: its declared columns in declaration order, `doc`, then any other stored column."""
    name = COLLECTIONS[kind]
    declared = [*table.columns, "doc"]
    cols = ", ".join(_q(c) for c in [*(c for c in declared if c in stored), *(c for c in stored if c not in declared)])
    order = ", ".join(_q(c) for c in table.order)
    licence = BOOK if kind in ("case", "derivation") else LICENCE
    page = urls.listing(kind) if kind != "derivation" else None
    return Kind(name, table.table, f"SELECT {cols} FROM {table.table} ORDER BY {order}",
                f"{name.replace('-', ' ').capitalize()}",
                f"The `{table.table}` table: one row per {kind} record, its filter columns, and `doc`, the "
                "whole record as JSON text with per-field provenance.", licence, page, urls.api_list(kind))


def _json_text(path: str) -> str:
    return f"json_extract_string(doc, '$.{path}')"


def _json_number(path: str, typ: str = "DOUBLE") -> str:
    return f"TRY_CAST(json_extract(doc, '$.{path}') AS {typ})"


def _fact_columns(name: str) -> str:
    """A fact inside `doc` as four columns: the number, its source, locator and published text."""
    return (f"{_json_number(name + '.value')} AS {name}, {_json_text(name + '.source')} AS {name}_source, "
            f"{_json_text(name + '.locator')} AS {name}_locator, "
            f"{_json_text(name + '.as_published')} AS {name}_as_published")


GPU_PRICES = Kind(
    "gpu-prices", "price",
    f"SELECT id, {_json_text('name')} AS name, provider, model, {_json_text('hardware')} AS hardware, date, "
    + ", ".join(f"{_json_text(c)} AS {c}" for c in ("pricing", "commitment", "region", "instance"))
    + f", {_json_number('devices_per_instance', 'INTEGER')} AS devices_per_instance, "
    + f"{_fact_columns('device_usd_per_hour')}, {_fact_columns('instance_usd_per_hour')}, doc "
    "FROM price WHERE json_type(doc, '$.device_usd_per_hour') = 'OBJECT' ORDER BY id",
    "GPU-hour prices",
    "The GPU-hour rental prices among the `price` records (those with `device_usd_per_hour`), flattened: the "
    "price per device and per instance as numbers with their source, locator and published text; `doc` is the "
    "whole record.", LICENCE, None, None)

#: the store's other tables (a licence "" is filled with the measured tables' licence of the store at hand)
EXTRA = (
    GPU_PRICES,
    Kind("facts", "fact", "SELECT * FROM fact ORDER BY kind, record_id, field", "Facts",
         "Every sourced number of the fact records, one row per dotted field path, with its source, locator and "
         "the text as published.", LICENCE),
    Kind("hardware-peaks", "hardware_peak",
         "SELECT * FROM hardware_peak ORDER BY hardware_id, input_precision, unit, sparsity, accumulator NULLS FIRST",
         "Hardware peaks", "The per-precision peak rates of every device (FLOP/s), each with its source and locator.",
         LICENCE),
    Kind("framework-features", "framework_feature",
         "SELECT * FROM framework_feature ORDER BY framework_id, feature, since NULLS FIRST", "Framework features",
         "The dated feature rows of the frameworks (version or date each feature landed), with sources.", LICENCE),
    Kind("measured-fits", "measured_fit", "SELECT * FROM measured_fit ORDER BY system, table_name, gpus",
         "Measured all-reduce fits", "The α–β line of every measured all-reduce (system, table, GPU count), with "
         "residuals.", DERIVED_FITS),
    Kind("measurement-files", "measurement_file", "SELECT * FROM measurement_file ORDER BY path", "Measurement files",
         "The manifest of the measured tables: the wheel path, sha256, rows and columns of every copied file.", ""),
)


def _measured_licence(store: Store) -> str:
    m = store.measurement_header or {}
    if not m:
        return "Measured by NVIDIA (aiconfigurator-core), Apache-2.0."
    return (f"Measured by NVIDIA and copied unmodified from {m.get('package')} {m.get('package_version')} "
            f"({m.get('source_url')}), {m.get('license')} ({m.get('license_url')}). {m.get('copyright', '')} "
            "Rows as published plus `system` and `file` (the manifest path); `latency` in milliseconds.").strip()


def kinds_of(store: Store) -> dict[str, Kind]:
    """Every downloadable table of this store, by URL name, in the order the index lists them."""
    stored: dict[str, list[str]] = {}
    for table, column in store._sql("SELECT table_name, column_name FROM information_schema.columns "
                                    "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"):
        stored.setdefault(table, []).append(column)
    out = {k.name: k for k in (_record_kind(kind, table, stored.get(table.table, []))
                               for kind, table in store.schema.items())}
    measured = _measured_licence(store)
    for k in EXTRA:
        out[k.name] = k if k.licence else Kind(**{**k.__dict__, "licence": measured})
    for table in store.measured_columns:
        name = "measured-" + table.replace("_", "-")
        out[name] = Kind(name, f"measured_{table}", f"SELECT * FROM measured_{table} ORDER BY file, rowid",
                         f"Measured {table.replace('_', ' ')}",
                         f"NVIDIA's measured `{table}` kernel table for every system, one row per measurement.",
                         measured, urls.measurement_table(table), urls.api_measurement_table(table))
    return out


# --------------------------------------------------------------------------- the files, cached per content hash

def default_cache_dir() -> Path:
    env = os.environ.get("CASEBOOK_EXPORT_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "casebook" / "export"


class ExportUnwritable(Exception):
    """No cache directory could take a download's file: the reason (the last error, errno text included)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


_NESTED = re.compile(r"\[|STRUCT|MAP|UNION")
#: what makes DuckDB's CSV writer quote a value (besides an empty string)
_QUOTED = re.compile(r'[,"\n\r#]')


def _csv_text(value: str) -> str:
    """A header name as DuckDB's CSV writer writes it."""
    return '"' + value.replace('"', '""') + '"' if not value or _QUOTED.search(value) else value


def _csv_field(expr: str) -> str:
    """SQL for one CSV field of a text expression, as DuckDB's CSV writer writes it."""
    return (f"CASE WHEN {expr} IS NULL THEN '' WHEN {expr} = '' OR regexp_matches({expr}, '[,\"\n\r#]') "
            f"THEN '\"' || replace({expr}, '\"', '\"\"') || '\"' ELSE {expr} END")


@dataclass
class Exporter:
    """The downloads of one open store: the kinds, their row counts and columns, and the files, each written
    once per content hash."""

    store: Store
    root: Path
    kinds: dict[str, Kind] = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _locks: dict[str, threading.Lock] = field(default_factory=dict, init=False)
    _files: dict[str, Path] = field(default_factory=dict, init=False)
    _index: dict[str, Any] | None = field(default=None, init=False)
    _private: Path | None = field(default=None, init=False)
    _failed: dict[str, tuple[float, str]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.kinds = kinds_of(self.store)
        self.hash = self.store.content_hash

    @property
    def short(self) -> str:
        return self.hash[:SHORT] or "unhashed"

    def _roots(self) -> Iterator[Path]:
        """Where the files may go, in order: the configured cache, then a private temporary directory (made on
        first need); never the store's own folder."""
        store_dir = self.store.path.resolve().parent
        if Path(self.root).resolve() != store_dir:
            yield Path(self.root)
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="casebook-export-"))
        if self._private != Path(self.root):
            yield self._private

    def _sql(self, sql: str) -> list[tuple]:
        return self.store._sql(sql)

    def columns(self, kind: Kind) -> list[dict[str, str]]:
        return [{"name": r[0], "type": r[1]} for r in self._sql(f"DESCRIBE {kind.select}")]

    def file(self, kind: Kind, fmt: str) -> Path:
        """The finished file of one kind in one format, written on first use. ExportUnwritable when no cache
        directory can take it (for RETRY_WRITE_S after a failure, without trying again)."""
        key = f"{kind.name}.{fmt}"
        found = self._files.get(key)
        if found is not None and found.exists():
            return found
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            found = self._files.get(key)
            if found is not None and found.exists():
                return found
            failed = self._failed.get(key)
            if failed is not None and time.monotonic() - failed[0] < RETRY_WRITE_S:
                raise ExportUnwritable(failed[1])
            errors = []
            try:
                for root in self._roots():
                    d = root / f"{self.hash or 'unhashed'}-v{EXPORT_VERSION}"
                    dest = d / f"casebook-{key}"
                    try:
                        d.mkdir(parents=True, exist_ok=True)
                        if not dest.exists():
                            self._write(kind, fmt, dest)
                    except OSError as exc:
                        errors.append(f"{d}: {exc.strerror or exc}")
                        continue
                    self._files[key] = dest
                    self._failed.pop(key, None)
                    return dest
            except OSError as exc:               # not even a temporary directory can be made
                errors.append(f"a temporary directory: {exc.strerror or exc}")
            reason = "the export cache cannot be written (" + "; ".join(errors) + ")"
            self._failed[key] = (time.monotonic(), reason)
            log.warning("export %s: %s", key, reason)
            raise ExportUnwritable(reason)

    def _csv_select(self, kind: Kind) -> str:
        """The SELECT of a CSV download: nested values (lists, structs, maps) as JSON text."""
        cols = self.columns(kind)
        if not any(_NESTED.search(c["type"]) for c in cols):
            return kind.select
        exprs = [f"to_json({_q(c['name'])})::VARCHAR AS {_q(c['name'])}" if _NESTED.search(c["type"])
                 else _q(c["name"]) for c in cols]
        return f"SELECT {', '.join(exprs)} FROM ({kind.select})"

    def _write(self, kind: Kind, fmt: str, dest: Path) -> None:
        """Write one file through a temporary name; OSError when it cannot be written."""
        if fmt == "csv":
            select, options = self._csv_select(kind), "FORMAT csv, HEADER true, DELIMITER ','"
        else:
            select, options = kind.select, "FORMAT parquet, COMPRESSION zstd"
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            self.store.copy_to(select, tmp, options)
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)

    def stream_csv(self, kind: Kind) -> Iterator[bytes]:
        """One kind as CSV read straight from the store, in chunks (for when no file can be written): the bytes
        DuckDB's CSV writer produces. Each line is made in SQL: every value as DuckDB renders it as text, NULL as
        nothing, and quoted (quotes doubled) when empty or holding a comma, quote, line break or `#`."""
        names = [c["name"] for c in self.columns(kind)]
        fields = " || ',' || ".join(_csv_field(f"CAST({_q(n)} AS VARCHAR)") for n in names)
        yield (",".join(_csv_text(n) for n in names) + "\n").encode()
        with self.store._cursor() as cur:
            cur.execute(f"SELECT {fields} FROM ({self._csv_select(kind)})")
            while rows := cur.fetchmany(STREAM_ROWS):
                yield ("\n".join(r[0] for r in rows) + "\n").encode()

    def index(self) -> dict[str, Any]:
        """The list of downloads: every kind with rows, columns and URLs, and the DuckDB file (computed once)."""
        if self._index is not None:
            return self._index
        items = []
        for k in self.kinds.values():
            rows = self._sql(f"SELECT count(*) FROM ({k.select})")[0][0]
            items.append({"kind": k.name, "title": k.title, "description": k.description, "table": k.table,
                          "rows": int(rows), "columns": self.columns(k),
                          "csv_url": urls.api_export_file(k.name, "csv"),
                          "parquet_url": urls.api_export_file(k.name, "parquet"),
                          "page_url": k.page, "api_url": k.api, "content_hash": self.hash, "licence": k.licence})
        tables = [{"table": t, "rows": int(self._sql(f"SELECT count(*) FROM {_q(t)}")[0][0])}
                  for (t,) in self._sql("SELECT table_name FROM information_schema.tables "
                                        "WHERE table_schema = 'main' ORDER BY table_name")]
        self._index = {
            "content_hash": self.hash, "short_hash": self.short, "built_at": self.store.meta.get("built_at"),
            "schema_version": self.store.meta.get("schema_version"), "licence": LICENCE,
            "provenance": "Generated by DuckDB from the read-only store built from knowledge/data/ (the content "
                          "hash is the SHA-256 of those data files and the migrations); the same hash is each "
                          "download's ETag and X-Content-Hash.",
            "formats": {f: m for f, m in FORMATS.items()},
            "kinds": items,
            "database": {"kind": DATABASE, "url": urls.api_export_database(), "filename": self.filename(DATABASE, "duckdb"),
                         "bytes": self.store.path.stat().st_size, "media_type": DUCKDB_MEDIA_TYPE,
                         "content_hash": self.hash, "tables": tables,
                         "description": "The built DuckDB store itself: open it read-only "
                                        "(`duckdb.connect(path, read_only=True)`); `meta` holds its content hash.",
                         "licence": LICENCE + " The measured_* tables: " + _measured_licence(self.store)},
        }
        return self._index

    def filename(self, kind: str, fmt: str) -> str:
        return f"casebook-{kind}-{self.short}.{fmt}" if kind != DATABASE else f"casebook-{self.short}.duckdb"


_CREATE = threading.Lock()


def exporter_of_app(app: Any) -> Exporter:
    """The app's exporter for its open store (a new one when the store changed). The cache directory is
    `app.state.export_dir` when set (tests), else `default_cache_dir()`."""
    state = app.state
    store: Store = state.store
    ex: Exporter | None = getattr(state, "exporter", None)
    if ex is None or ex.store is not store or ex.hash != store.content_hash:
        with _CREATE:
            ex = getattr(state, "exporter", None)
            if ex is None or ex.store is not store or ex.hash != store.content_hash:
                root = getattr(state, "export_dir", None) or default_cache_dir()
                ex = Exporter(store, Path(root))
                state.exporter = ex
    return ex


def exporter_of(request: Request) -> Exporter:
    return exporter_of_app(request.app)


# --------------------------------------------------------------------------- HTTP

class ExportColumn(BaseModel):
    name: str
    type: str


class ExportKind(BaseModel):
    kind: str
    title: str
    description: str
    table: str
    rows: int
    columns: list[ExportColumn]
    csv_url: str
    parquet_url: str
    page_url: str | None = None
    api_url: str | None = None
    content_hash: str
    licence: str


class ExportTable(BaseModel):
    table: str
    rows: int


class ExportDatabase(BaseModel):
    kind: str
    url: str
    filename: str
    bytes: int
    media_type: str
    content_hash: str
    tables: list[ExportTable]
    description: str
    licence: str


class ExportIndex(BaseModel):
    content_hash: str
    short_hash: str
    built_at: str | None = None
    schema_version: str | None = None
    licence: str
    provenance: str
    formats: dict[str, str]
    kinds: list[ExportKind]
    database: ExportDatabase


def _etag(h: str) -> str:
    return f'"{h}"'


def _matches(request: Request, h: str) -> bool:
    """Whether If-None-Match names this content hash (weak or strong, or `*`)."""
    header = request.headers.get("if-none-match")
    if not header or not h:
        return False
    tags = [t.strip() for t in header.split(",")]
    return any(t == "*" or t.removeprefix("W/") == _etag(h) for t in tags)


def _identity(ex: Exporter) -> dict[str, str]:
    return {"ETag": _etag(ex.hash), "X-Content-Hash": ex.hash, "Cache-Control": CACHE_CONTROL}


def _not_modified(ex: Exporter) -> Response:
    return Response(status_code=304, headers=_identity(ex))


def _unknown(request: Request, ex: Exporter, name: str, fmt: str | None) -> Response:
    choices = [*ex.kinds, DATABASE]
    suggestions = close_matches(name, choices)
    hint = phrase(suggestions)
    if fmt is None:
        detail = f"no download {name!r}: a download is `<kind>.csv`, `<kind>.parquet` or `{DATABASE}.duckdb`.{hint}"
    else:
        detail = f"no export kind {name!r}; see {urls.api_export()} for the kinds.{hint}"
    return problem(404, "Unknown export", detail, kind="not-found", instance=request.url.path, see=urls.api_export(),
                   kinds=list(ex.kinds), formats=[*FORMATS, "duckdb"], suggestions=suggestions)


def _table_file(request: Request, kind: str, fmt: str) -> Response:
    ex = exporter_of(request)
    k = ex.kinds.get(kind)
    if k is None:
        return _unknown(request, ex, kind, fmt)
    if _matches(request, ex.hash):
        return _not_modified(ex)
    try:
        path = ex.file(k, fmt)
    except ExportUnwritable as exc:
        if fmt == "csv":         # the same table, read from the store as it is sent
            disposition = f'attachment; filename="{ex.filename(k.name, fmt)}"'
            return StreamingResponse(ex.stream_csv(k), media_type=FORMATS[fmt], headers={
                **_identity(ex), "Content-Disposition": disposition, "X-Export-Source": "store"})
        retry = str(int(RETRY_WRITE_S))
        return problem(503, "Export unavailable", f"{exc.reason}: the Parquet file cannot be made now; the same table "
                       f"as CSV is served from the store ({urls.api_export_file(k.name, 'csv')})",
                       kind="export-unwritable", instance=request.url.path, headers={"Retry-After": retry},
                       csv_url=urls.api_export_file(k.name, "csv"))
    return FileResponse(path, media_type=FORMATS[fmt], filename=ex.filename(k.name, fmt), headers=_identity(ex))


def _database(request: Request) -> Response:
    ex = exporter_of(request)
    if _matches(request, ex.hash):
        return _not_modified(ex)
    return FileResponse(ex.store.path, media_type=DUCKDB_MEDIA_TYPE, filename=ex.filename(DATABASE, "duckdb"),
                        headers=_identity(ex))


def _binary(media_type: str, kinds: bool = True) -> dict[int | str, dict[str, Any]]:
    """The documented answers of a download route (with `kinds`, the 404 of an unknown kind)."""
    out: dict[int | str, dict[str, Any]] = {
        200: {"description": "The file, streamed; ETag and X-Content-Hash are the store's content hash.",
              "content": {media_type.split(";")[0]: {"schema": {"type": "string"} if media_type.startswith("text/")
                                                     else {"type": "string", "format": "binary"}}}},
        304: {"description": "Not modified: If-None-Match named the current content hash."}}
    if kinds:
        out[404] = {"description": "Unknown kind: a problem listing the kinds (and the nearest names).",
                    "content": {"application/problem+json": {}}}
        out[503] = {"description": "The file cannot be written to the export cache (a full disk: the reason, and "
                                   "Retry-After; CSV is then streamed from the store instead), or the store cannot "
                                   "be read.", "content": {"application/problem+json": {}}}
    return out


@router.get("/export", response_model=ExportIndex, summary="List the downloads",
            description="Every table of the store as CSV and Parquet, and the built DuckDB file: per kind the row "
                        "count, columns with types, URLs, the store's content hash and a licence and provenance note.")
def export_index(request: Request):
    ex = exporter_of(request)
    if _matches(request, ex.hash):
        return _not_modified(ex)
    return FastJSONResponse(ex.index(), headers=_identity(ex))


@router.get(f"/export/{DATABASE}.duckdb", response_class=Response, responses=_binary(DUCKDB_MEDIA_TYPE, kinds=False),
            summary="Download the built DuckDB store",
            description="The store file itself (open it read-only). ETag and X-Content-Hash are its content hash.")
def export_database(request: Request):
    return _database(request)


@router.head(f"/export/{DATABASE}.duckdb", include_in_schema=False)
def export_database_head(request: Request):
    return _database(request)


@router.get("/export/{kind}.csv", response_class=Response, responses=_binary(FORMATS["csv"]), summary="Download one table as CSV",
            description="One table as CSV (UTF-8, header row; nested values as JSON text, `doc` the whole record). "
                        "Unknown kinds answer 404 with the list of kinds.")
def export_csv(kind: str, request: Request):
    return _table_file(request, kind, "csv")


@router.head("/export/{kind}.csv", include_in_schema=False)
def export_csv_head(kind: str, request: Request):
    return _table_file(request, kind, "csv")


@router.get("/export/{kind}.parquet", response_class=Response, responses=_binary(FORMATS["parquet"]),
            summary="Download one table as Parquet",
            description="One table as Parquet (zstd), written by DuckDB with the store's column types. Unknown kinds "
                        "answer 404 with the list of kinds.")
def export_parquet(kind: str, request: Request):
    return _table_file(request, kind, "parquet")


@router.head("/export/{kind}.parquet", include_in_schema=False)
def export_parquet_head(kind: str, request: Request):
    return _table_file(request, kind, "parquet")


@router.get("/export/{name}", include_in_schema=False)
def export_unknown(name: str, request: Request):
    """Anything else under /export: a 404 naming the kinds and formats."""
    ex = exporter_of(request)
    stem, _, fmt = name.rpartition(".")
    return _unknown(request, ex, stem or name, None)
