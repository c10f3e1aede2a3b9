"""Measured kernel tables (NVIDIA aiconfigurator-core 0.12.0, Apache-2.0): the manifest, filtered rows,
and the α–β fits of the measured all-reduces.

Rows are the published Parquet rows as they are (`latency` in milliseconds, `message_size` in
elements of the row's dtype), plus `system` and `file` (the manifest path), and two derived SI
fields: `latency_s`, and `message_bytes` on the communication tables. The fits are derived facts
computed at build time (`measured_fit`), each naming the measured file and sha256 it came from.
`/measurements/fits` is declared before `/measurements/{table}`, and no measured table may be named
`fits`.
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Optional

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import BaseModel, Field, field_validator

from api.deps import get_store
from api.problems import problem
from api.queries import ListQuery, Offset
from api.responses import FastJSONResponse
from api.routes.common import NotFound
from api.urls import urls
from knowledge.measurements import DTYPE_BYTES, MESSAGE_DTYPE, TABLES, UNITS, latency_s_per_unit
from knowledge.store import Page, Store
from knowledge.measurements import FIT_METHOD, FITTED_TABLES

router = APIRouter(tags=["measurements"])

#: the path segment of the fits list, which `/measurements/{table}` must never read as a table
FITS = "fits"
#: any table name but `fits` (its own route), spelled without look-ahead, which the schema regex engine lacks
NOT_FITS = r"^([^f].*|f([^i].*)?|fi([^t].*)?|fit([^s].*)?|fits.+)$"
if FITS in TABLES:
    raise RuntimeError(f"a measured table may not be named {FITS!r}: /measurements/{FITS} lists the fits")

Text = Annotated[Optional[str], Field(max_length=100)]
Count = Annotated[Optional[int], Field(ge=0, le=10**12)]
RowLimit = Annotated[int, Field(ge=1, le=1000, description="Rows per page (1–1000).")]


# --------------------------------------------------------------------------- queries

class MeasurementFilesQuery(ListQuery):
    """Filters of the manifest list."""

    exact: ClassVar[dict[str, str]] = {"system": "system", "table": "table"}

    system: Text = Field(None, description="e.g. h100_sxm, l40s")
    table: Text = Field(None, description=f"one of {', '.join(TABLES)}")
    limit: RowLimit = 100
    offset: Offset = 0

    def run_files(self, store: Store) -> Page:
        """The manifest entries matching the filters (text case-insensitively), in path order."""
        items = [f for f in store.measurement_files
                 if all(v is None or str(f[col]).lower() == v.lower() for col, v in
                        ((c, getattr(self, n)) for n, c in self.exact.items()))]
        return Page(items[self.offset:self.offset + self.limit], len(items), self.limit, self.offset)


class MeasurementQuery(ListQuery):
    """Filters of one measured table: each matches the column of the same name exactly (text
    case-insensitively); `framework` matches the file's framework folder (vllm, nccl)."""

    exact: ClassVar[dict[str, str]] = {}  # filled below: every field but limit/offset is a column filter

    system: Text = Field(None, description="measured system, e.g. h100_sxm, l40s")
    framework: Text = Field(None, description="framework folder of the file: vllm, sglang, trtllm or nccl")
    op_name: Text = Field(None, description="e.g. all_reduce, all_gather, alltoall, reduce_scatter")
    kernel_source: Text = None
    backend: Text = Field(None, description="custom all-reduce: vllm_graph or vllm_eager")
    nccl_dtype: Text = Field(None, description="half or int8")
    allreduce_dtype: Text = None
    gemm_dtype: Text = None
    attn_dtype: Text = None
    kv_cache_dtype: Text = None
    moe_dtype: Text = None
    distribution: Text = None
    num_gpus: Count = None
    message_size: Count = Field(None, description="elements of the row's dtype (not bytes)")
    m: Count = None
    n: Count = None
    k: Count = None
    batch_size: Count = None
    isl: Count = None
    num_heads: Count = None
    num_key_value_heads: Count = None
    head_dim: Count = None
    step: Count = None
    window_size: Count = None
    num_tokens: Count = None
    hidden_size: Count = None
    inter_size: Count = None
    topk: Count = None
    num_experts: Count = None
    moe_tp_size: Count = None
    moe_ep_size: Count = None
    limit: RowLimit = 100
    offset: Offset = 0

    def where(self) -> dict[str, Any]:
        out = {n: getattr(self, n) for n in self.exact if getattr(self, n) is not None}
        if "framework" in out:
            out["framework_dir"] = out.pop("framework")
        return out

    def unknown_columns(self, columns: list[str]) -> list[str]:
        """Filters given that the table has no column for (framework is the file's, always known)."""
        return [n for n in self.exact if getattr(self, n) is not None and n != "framework" and n not in columns]


MeasurementQuery.exact = {n: n for n in MeasurementQuery.model_fields if n not in ("limit", "offset")}


class MeasuredFitsQuery(ListQuery):
    """Filters of the fits list (text case-insensitively)."""

    exact: ClassVar[dict[str, str]] = {"system": "system", "table": "table_name", "gpus": "gpus"}

    system: Text = Field(None, description="measured system, e.g. h100_sxm, l40s")
    table: Text = Field(None, description=f"the fitted table: {' or '.join(FITTED_TABLES)}")
    gpus: Annotated[Optional[int], Field(ge=1, le=1_000_000, description="GPU count of the all-reduce")] = None
    limit: RowLimit = 100
    offset: Offset = 0

    @field_validator("table")
    @classmethod
    def _fitted(cls, value: Optional[str]) -> Optional[str]:
        if value is not None and value.lower() not in FITTED_TABLES:
            raise ValueError(f"fits exist for {', '.join(FITTED_TABLES)} only")
        return value.lower() if value is not None else None

    def run_fits(self, store: Store) -> Page:
        """The stored fits matching the filters, each with the URL of the rows it was fitted to."""
        page = store.measured_fits(self.system, self.table, self.gpus, self.limit, self.offset)
        page.items = [{**f, "rows_url": fitted_rows_url(f)} for f in page.items]
        return page


def fitted_rows_url(fit: dict[str, Any]) -> str:
    """The JSON URL of the measured rows one fit was made from (system, op, dtype, backend, GPU count)."""
    query: dict[str, Any] = {"system": fit["system"], "op_name": fit["op_name"]}
    if fit.get("dtype") and fit["table"] in MESSAGE_DTYPE:
        query[MESSAGE_DTYPE[fit["table"]]] = fit["dtype"]
    if fit.get("backend"):
        query["backend"] = fit["backend"]
    return urls.api_measurement_table(fit["table"], **query, num_gpus=fit["gpus"])


# --------------------------------------------------------------------------- schemas (OpenAPI)

class MeasurementFile(BaseModel):
    path: str = Field(description="Path under knowledge/data/measured/ (the `file` of each row).")
    system: str
    op: str
    table: str
    framework: str
    version: str = Field(description="The wheel directory's version (= directory_version).")
    directory_version: Optional[str] = Field(None, description="The version in the wheel's directory name.")
    collected_with: Optional[str] = Field(None, description="The version the rows name in their `version` column "
                                          "(the one to cite; can differ from the directory's).")
    path_in_wheel: str
    sha256: str = Field(description="SHA-256 of the file: the same bytes as in the wheel.")
    bytes: int
    gpu: Optional[str] = None
    rows: int
    columns: list[str]
    license: str
    package: str
    package_version: str
    table_url: Optional[str] = Field(None, description="The rows of this file as JSON.")


class MeasurementFilesPage(BaseModel):
    package: Optional[str] = None
    package_version: Optional[str] = None
    license: Optional[str] = None
    license_url: Optional[str] = None
    source_url: Optional[str] = None
    wheel: Optional[str] = None
    wheel_sha256: Optional[str] = None
    copyright: Optional[str] = None
    units: dict[str, str] = {}
    items: list[MeasurementFile]
    total: int
    limit: int
    offset: int
    next: Optional[str] = None


class MeasuredRowsPage(BaseModel):
    table: str
    units: dict[str, str]
    columns: list[str]
    items: list[dict[str, Any]]
    total: int
    limit: int
    offset: int
    next: Optional[str] = None


class MeasuredFit(BaseModel):
    """The α–β fit of one measured all-reduce: a derived fact whose source is the measured file."""

    system: str
    table: str = Field(description="nccl or custom_allreduce")
    gpus: int
    start_up_s: float = Field(description="a: start-up of the whole all-reduce, s")
    algorithm_bytes_per_s: float = Field(description="b: message bytes per second")
    alpha_s: float = Field(description="α = a / (2(p−1)): latency per ring round, s")
    link_bytes_per_s: float = Field(description="B = b · 2(p−1)/p: one-way bytes per second per rank")
    rms_relative_residual: float = Field(description="root-mean-square of fitted / measured − 1 over the points")
    max_relative_residual: float = Field(description="largest |fitted / measured − 1| over the points")
    points: int
    message_bytes_min: float
    message_bytes_max: float
    op_name: str
    dtype: Optional[str] = Field(None, description="dtype of the rows fitted (message bytes = elements × its size)")
    backend: Optional[str] = Field(None, description="custom all-reduce backend fitted (vllm_graph)")
    file: str = Field(description="The measured file (path under knowledge/data/measured/).")
    sha256: str = Field(description="SHA-256 of that file.")
    method: str = Field(description=FIT_METHOD)
    rows_url: str = Field(description="The measured rows this fit was made from, as JSON.")


class MeasuredFitsPage(BaseModel):
    method: str
    items: list[MeasuredFit]
    total: int
    limit: int
    offset: int
    next: Optional[str] = None


# --------------------------------------------------------------------------- shared with the site

def files_page(store: Store, query: MeasurementFilesQuery) -> tuple[dict[str, Any], Page]:
    """The manifest header and a page of its files, each with the URL of its rows."""
    page = query.run_files(store)
    page.items = [{**f, "table_url": urls.api_measurement_table(f["table"], system=f["system"])} for f in page.items]
    return dict(store.measurement_header), page


def with_si(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row with `latency_s` (the published ms / 1000; µs / 1e6 for the all-to-all tables) and, for communication
    tables, `message_bytes`."""
    out = dict(row)
    if isinstance(row.get("latency"), (int, float)):
        out["latency_s"] = row["latency"] * latency_s_per_unit(table)
    dtype_col = MESSAGE_DTYPE.get(table)
    if dtype_col and isinstance(row.get("message_size"), int):
        size = DTYPE_BYTES.get(str(row.get(dtype_col)).lower())
        out["message_bytes"] = row["message_size"] * size if size else None
    return out


class BadFilter(Exception):
    """A filter on a column the table does not have."""

    def __init__(self, table: str, fields: list[str]):
        self.table, self.fields = table, fields
        super().__init__(f"the {table} table has no column {', '.join(fields)}")


def rows_page(store: Store, table: str, query: MeasurementQuery) -> Page:
    """A page of rows of one measured table; NotFound for an unknown table, BadFilter for a filter on
    a column the table lacks."""
    if table not in TABLES or table not in store.measured_columns:
        raise NotFound("measurement table", table, urls.api_measurements(),
                       choices=[t for t in TABLES if t in store.measured_columns])
    bad = query.unknown_columns(store.measured_columns[table])
    if bad:
        raise BadFilter(table, bad)
    page = store.measured_page(table, query.where(), query.limit, query.offset)
    page.items = [with_si(table, r) for r in page.items]
    return page


def _next(request: Request, page: Page) -> str | None:
    if page.offset + page.limit < page.total:
        from api.urls import page_link  # relative (or CASEBOOK_BASE_URL), never from the Host header
        return page_link(request.url.path, request.query_params.multi_items(), offset=page.offset + page.limit,
                         limit=page.limit)
    return None


# --------------------------------------------------------------------------- routes

@router.get("/measurements", response_model=MeasurementFilesPage, summary="List the measured tables and their provenance",
            description="The measured kernel tables copied byte for byte from NVIDIA's aiconfigurator-core 0.12.0 wheel "
                        "(Apache-2.0): per file the system, table, framework and version, GPU, rows, path in the "
                        "wheel and sha256. `latency` is in ms; `message_size` counts elements, not bytes.")
def list_measurements(request: Request, query: Annotated[MeasurementFilesQuery, Query()],
                      store: Store = Depends(get_store)) -> FastJSONResponse:
    header, page = files_page(store, query)
    return FastJSONResponse({**header, "items": page.items, "total": page.total, "limit": page.limit,
                             "offset": page.offset, "next": _next(request, page)})


@router.get(f"/measurements/{FITS}", response_model=MeasuredFitsPage, summary="List the α–β fits of the measured all-reduces",
            description="Derived facts computed at build time: per measured system, table (nccl, custom_allreduce with "
                        "backend vllm_graph) and GPU count p, the line T = a + M/b fitted to the 16-bit all-reduce "
                        "rows by least squares on relative error, read as a ring all-reduce (α = a/(2(p−1)) per round, "
                        "B = b·2(p−1)/p one way), with its RMS and largest relative residual and the measured file "
                        "(path, sha256) it came from. Filters: system, table, gpus; a table without fits answers 422.")
def list_measured_fits(request: Request, query: Annotated[MeasuredFitsQuery, Query()],
                       store: Store = Depends(get_store)) -> FastJSONResponse:
    page = query.run_fits(store)
    return FastJSONResponse({"method": FIT_METHOD, "items": page.items, "total": page.total, "limit": page.limit,
                             "offset": page.offset, "next": _next(request, page)})


@router.get("/measurements/{table}", response_model=MeasuredRowsPage, summary="List rows of one measured table",
            description="Rows of nccl, custom_allreduce, gemm, context_attention, generation_attention or moe, "
                        "filtered by system, framework and any column (exact match). Each row keeps the published "
                        "columns (latency in ms, message_size in elements) and adds `latency_s` and, for the "
                        "communication tables, `message_bytes`. A filter on a column the table lacks answers 422; "
                        "an unknown table 404.")
def list_measured_rows(request: Request, table: Annotated[str, Path(min_length=1, max_length=100, pattern=NOT_FITS,
                                                          description=f"a measured table; `{FITS}` is its own route")],
                       query: Annotated[MeasurementQuery, Query()], store: Store = Depends(get_store)):
    try:
        page = rows_page(store, table, query)
    except BadFilter as exc:
        errors = [{"field": f, "in": "query", "message": f"not a column of the {table} table", "type": "unknown_column"}
                  for f in exc.fields]
        return problem(422, "Invalid request", f"invalid field(s): {', '.join(exc.fields)}", kind="validation",
                       errors=errors, instance=request.url.path)
    return FastJSONResponse({"table": table, "units": UNITS, "columns": store.measured_columns[table],
                             "items": page.items, "total": page.total, "limit": page.limit, "offset": page.offset,
                             "next": _next(request, page)})
