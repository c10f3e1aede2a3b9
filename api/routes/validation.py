"""Serving estimates against published measurements as JSON: `/api/v1/validation` (every stored benchmark point with
the `serving-estimate` answer for its deployment, and the error tables) and `/api/v1/validation/{benchmark_id}`.

`knowledge.validation.report` recomputes the estimate for every stored point. It costs tens of seconds of CPU the
first time in a process (the measured kernel tables of each accelerator load), so the report is computed once per
store version and code, lazily, under a lock, in the request's worker thread (these routes are plain `def`, which
FastAPI runs in its thread pool, never on the event loop), and kept in `_CACHE`. It is also written beside the
store (`<db>.validation/<key>.json`, `key` = sha256 of the store's content hash and the bytes of the code that
computes it), so that a restarted worker, another worker or `casebook validate --db` reads it instead of computing
again (workers starting together take turns on a file lock there, so one computes and the others read); a
directory that cannot be written only loses that. Filters are parsed by the query model before anything
is computed, and a filtered answer is a view of the cached report (the tables are recomputed over the rows kept,
~1 ms), so neither a filter nor a fuzzer can trigger a recomputation.
"""
from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar

import orjson
from fastapi import APIRouter, Depends, Path as PathParam, Query
from pydantic import Field

from api import schemas as S
from api.deps import get_store
from api.queries import BenchmarkFrameworkName, ListQuery
from api.responses import FastJSONResponse
from api.routes.common import NotFound
from api.urls import urls
from knowledge import validation as V
from knowledge.store import Store

log = logging.getLogger("casebook.validation")
router = APIRouter(tags=["benchmarks"])

#: layout of the persisted report (bumped when the cached shape changes: an old file is then simply not found)
FORMAT = "v1"
ROOT = Path(__file__).resolve().parents[2]
#: the code whose bytes key the cache: the validation and everything `serving-estimate` runs
CODE = ("knowledge/validation.py", "calculators")
#: the by_* tables of a report: key -> (label, the row's group)
GROUPS: dict[str, tuple[str, Any]] = {
    "by_source": ("source", lambda r: r.source),
    "by_hardware": ("hardware", lambda r: r.hardware or "?"),
    "by_model_family": ("model family", V.family_of),
    "by_framework": ("framework", lambda r: r.framework),
    "by_load": ("load", lambda r: r.load),
}
METRICS = ("tpot_s", "output_tokens_per_s_per_device", "ttft_s")
METHOD = {
    "compared": "A point is compared when the store describes its deployment: model and accelerator records, "
                "framework vLLM, SGLang or TensorRT-LLM, a closed-loop, Poisson, MLPerf Server or offline load, and "
                "published mean input and output lengths; every other point is listed with the reason.",
    "request": "Each compared point becomes one serving-estimate request; the rules used (fp4 by vendor, "
               "range-ratio means, finite runs, ep not stated) are listed in the row's mapping.",
    "error": "predicted / measured - 1: positive is an estimate slower (TPOT, TTFT) or faster (tokens/s) than the "
             "measurement. Medians are of |error|; within_25_percent is the share with |error| <= 0.25.",
    "calibration": "Nothing is fitted on these points: they are the errors of the uncalibrated estimate.",
    "bound": "bound_below_measured: whether the estimate's peak-rate floor (bound_tpot_s) is at or below the "
             "measured TPOT, as a floor must be.",
    "target": "Issue #25: median |TPOT error| <= 15 %, >= 70 % of points within 25 %, median |tokens/s per device "
              "error| <= 20 %.",
}

_CACHE: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()


# --------------------------------------------------------------------------- the cached report

@lru_cache(maxsize=1)
def code_digest() -> str:
    """sha256 over the paths and bytes of the code that computes the report (read once per process)."""
    h = hashlib.sha256(FORMAT.encode())
    for entry in CODE:
        base = ROOT / entry
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            h.update(str(path.relative_to(ROOT)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(store: Store) -> str:
    """The report's identity: the store's content hash and the code's digest."""
    return hashlib.sha256(f"{store.content_hash}|{code_digest()}".encode()).hexdigest()


def cache_dir(store: Store) -> Path:
    """Where the report of the store at `store.path` is persisted: `<db>.validation/` beside it."""
    return store.path.with_name(store.path.name + ".validation")


def _read_persisted(path: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("rows"), list) else None


def _persist(directory: Path, key: str, raw: bytes) -> None:
    """Write the report into `directory` (a temporary file renamed into place) and remove older reports there."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".report-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.chmod(tmp, 0o644)        # as readable as the store beside it (mkstemp makes 0600)
        os.replace(tmp, directory / f"{key}.json")
        for old in directory.glob("*.json"):      # (the lock file is no .json)
            if old.name != f"{key}.json":
                old.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("validation report not persisted in %s (%s): it is kept in memory only", directory, exc)


@contextmanager
def _across_processes(directory: Path) -> Iterator[None]:
    """An exclusive lock on `<directory>/.lock` (fcntl), so that workers started together compute the report once;
    no lock (each computes) where the directory cannot be written or fcntl is missing."""
    try:
        import fcntl
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                 # closing releases the lock


def _enrich(report: dict[str, Any], store: Store) -> dict[str, Any]:
    """The report with what each row's page needs: published names, model family, its links."""
    for row in report["rows"]:
        rec = store.get("benchmark", row["id"]) or {}
        row["model_hf"], row["hardware_name"] = rec.get("model_hf"), rec.get("hardware_name")
        row["devices"] = rec.get("devices")
        row["model_family"] = V.family_of(V.Row(**_row_fields(row)))
        row["page_url"], row["api_url"] = urls.benchmark(row["id"]), urls.api_item("benchmark", row["id"])
        row["validation_url"] = urls.api_validation_point(row["id"])
        row["calculator_url"] = urls.calculator("serving-estimate", row["request"]) if row.get("compared") else None
    return report


def report(store: Store) -> dict[str, Any]:
    """The validation report of `store` (computed at most once per store version and code in a process, else read
    from memory or from its persisted copy). Shared: callers must not modify it."""
    key = cache_key(store)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is None:
            directory = cache_dir(store)
            with _across_processes(directory):      # the other workers wait for one computation, then read it
                data = _read_persisted(directory / f"{key}.json")
                if data is None:
                    raw = orjson.dumps(V.report(store.lookup), option=orjson.OPT_SERIALIZE_NUMPY)
                    _persist(directory, key, raw)
                    data = orjson.loads(raw)     # plain floats, as a persisted copy reads back
            hit = _enrich(data, store)
            hit["cache_key"] = key
            _CACHE[key] = hit
    return hit


def clear_cache() -> None:
    """Forget the reports computed in this process (their persisted copies stay)."""
    with _LOCK:
        _CACHE.clear()


# --------------------------------------------------------------------------- filtered views

_ROW_FIELDS = frozenset(V.Row.__dataclass_fields__)


def _row_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k in _ROW_FIELDS}


def _empty_group() -> dict[str, Any]:
    stat = {"n": 0, "median_abs_error": None, "within_25_percent": None}
    return {"points": 0, **{m: dict(stat) for m in METRICS}, "bound_below_measured": {"n": 0, "holds": 0}}


def tables(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """overall and the by_* tables over `rows` (those not compared count nowhere)."""
    objs = [V.Row(**_row_fields(r)) for r in rows]
    out: dict[str, Any] = {"overall": V.summary(objs).get("all") or _empty_group()}
    for name, (_, key) in GROUPS.items():
        out[name] = V.summary(objs, key)
    return out


Filter = Annotated[str | None, Field(max_length=200)]


class ValidationQuery(ListQuery):
    """Which points a validation answer covers (blank = any). Text is matched case-insensitively and exactly."""

    kind_listed: ClassVar[str] = "benchmark"

    source: Filter = Field(None, description="Source id of the points, e.g. mlperf-inference-v5.1.")
    hardware: Filter = Field(None, description="Store hardware id (e.g. h200-sxm) or the published accelerator name.")
    model: Filter = Field(None, description="Store model id (e.g. llama-3.1-70b) or the Hugging Face name as published.")
    model_family: Filter = Field(None, description="Model family as the tables group it (llama, deepseek, qwen, …).")
    framework: BenchmarkFrameworkName | None = None
    compared: bool | None = Field(None, description="true: only the points compared; false: only those that are not.")

    def filters(self) -> dict[str, Any]:
        out = {k: ("" if getattr(self, k) is None else getattr(self, k))
               for k in ("source", "hardware", "model", "model_family", "compared")}
        out["framework"] = self.framework.value if self.framework is not None else ""
        return out

    def given(self) -> dict[str, Any]:
        """The filters set, as query parameters."""
        return {k: v for k, v in self.filters().items() if v != ""}

    def keeps(self, row: dict[str, Any]) -> bool:
        def same(value: str | None, *have: Any) -> bool:
            return value is None or any(isinstance(h, str) and h.lower() == value.lower() for h in have)

        return (same(self.source, row["source"]) and same(self.hardware, row["hardware"], row.get("hardware_name"))
                and same(self.model, row["model"], row.get("model_hf"))
                and same(self.model_family, row.get("model_family"))
                and (self.framework is None or row["framework"] == self.framework.value)
                and (self.compared is None or row["compared"] is self.compared))


def view(rep: dict[str, Any], query: ValidationQuery | None = None) -> dict[str, Any]:
    """The answer for `query`: its rows of the report, their tables, and what it covers."""
    query = query or ValidationQuery()
    rows = [r for r in rep["rows"] if query.keeps(r)]
    compared = sum(r["compared"] for r in rows)
    return {"stored": len(rep["rows"]), "points": len(rows), "compared": compared, "not_compared": len(rows) - compared,
            "filters": query.given(), "within": V.WITHIN, "method": METHOD, **tables(rows),
            "not_compared_reasons": {r["id"]: r["reason"] for r in rows if not r["compared"]},
            "rows": rows, "cache_key": rep["cache_key"]}


def point(rep: dict[str, Any], benchmark_id: str) -> dict[str, Any] | None:
    """One point's row and, when compared, the tables of the points estimated on the same basis (the same measured
    kernels, or the bound): how far off an estimate of its kind has been."""
    row = next((r for r in rep["rows"] if r["id"] == benchmark_id), None)
    if row is None:
        return None
    same = [r for r in rep["rows"] if r["compared"] and r.get("basis") == row.get("basis")] if row["compared"] else []
    return {**row, "same_basis": tables(same)["overall"] if same else None}


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.0f} %" if abs(v) < 100 else f"{100 * v:.2g} %"


def format_text(v: dict[str, Any]) -> str:
    """The answer as the tables `casebook validate` prints."""
    o = v["overall"]
    lines = [f"serving-estimate against published measurements: {v['compared']} of {v['points']} points compared"
             + (f" ({v['stored']} stored; filters {v['filters']})" if v["filters"] else ""),
             f"  median |TPOT error| {_pct(o['tpot_s']['median_abs_error'])} over {o['tpot_s']['n']} points, "
             f"{_pct(o['tpot_s']['within_25_percent'])} within ±25 %",
             f"  median |tokens/s per device error| {_pct(o['output_tokens_per_s_per_device']['median_abs_error'])} "
             f"over {o['output_tokens_per_s_per_device']['n']}, "
             f"{_pct(o['output_tokens_per_s_per_device']['within_25_percent'])} within ±25 %",
             f"  median |TTFT error| {_pct(o['ttft_s']['median_abs_error'])} over {o['ttft_s']['n']}",
             f"  bound at or below the measured TPOT: {o['bound_below_measured']['holds']} of "
             f"{o['bound_below_measured']['n']}"]
    head = f"{'':44} {'points':>6}  {'TPOT n':>6} {'|err|':>6} {'±25%':>5}  {'tok/s n':>7} {'|err|':>6} {'±25%':>5}" \
           f"  {'TTFT n':>6} {'|err|':>6}"
    for name, (label, _) in GROUPS.items():
        lines += ["", f"by {label}", head]
        for g, e in v[name].items():
            t, d, f = e["tpot_s"], e["output_tokens_per_s_per_device"], e["ttft_s"]
            lines.append(f"{g[:44]:44} {e['points']:6}  {t['n']:6} {_pct(t['median_abs_error']):>6} "
                         f"{_pct(t['within_25_percent']):>5}  {d['n']:7} {_pct(d['median_abs_error']):>6} "
                         f"{_pct(d['within_25_percent']):>5}  {f['n']:6} {_pct(f['median_abs_error']):>6}")
    if v["not_compared"]:
        reasons: dict[str, int] = {}
        for why in v["not_compared_reasons"].values():
            reasons[why] = reasons.get(why, 0) + 1
        lines += ["", f"not compared: {v['not_compared']} points"]
        lines += [f"  {n:3} × {why}" for why, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))]
    return "\n".join(lines)


# --------------------------------------------------------------------------- routes

Id = Annotated[str, PathParam(min_length=1, max_length=200, description="Benchmark point id (lowercase slug).")]


@router.get("/validation", response_model=S.ValidationReport, summary="Serving estimates against published measurements",
            description="`serving-estimate` recomputed for every stored benchmark point: each row's request (with the "
                        "mapping rules it used), predicted beside measured TPOT, TTFT and output tokens/s per device, "
                        "their errors (predicted / measured − 1) and whether the peak-rate floor is below the measured "
                        "TPOT; points the store cannot describe are listed with the reason. Tables `overall` and "
                        "`by_source`, `by_hardware`, `by_model_family`, `by_framework`, `by_load`: points, median "
                        "|error| and the share within ±25 % per metric. The filters keep some rows and the tables are "
                        "recomputed over them. Computed once per data version (tens of seconds the first time), then "
                        "cached.")
def get_validation(query: Annotated[ValidationQuery, Query()], store: Store = Depends(get_store)) -> FastJSONResponse:
    return FastJSONResponse(view(report(store), query))


@router.get("/validation/{benchmark_id}", response_model=S.ValidationPoint,
            summary="One benchmark point: predicted against measured",
            description="The validation row of one stored benchmark point (its request, predicted and measured "
                        "figures, errors, mapping, or why it is not compared) and `same_basis`: the error table of the "
                        "points estimated on the same basis (the same measured kernels, or the bound). Unknown ids "
                        "answer 404 with the closest ids.")
def get_validation_point(benchmark_id: Id, store: Store = Depends(get_store)) -> FastJSONResponse:
    if store.get("benchmark", benchmark_id) is None:     # before any computing: an unknown id costs nothing
        raise NotFound("benchmark", benchmark_id, urls.api_validation())
    found = point(report(store), benchmark_id)
    if found is None:
        raise NotFound("benchmark", benchmark_id, urls.api_validation())
    return FastJSONResponse(found)


__all__ = ["ValidationQuery", "cache_dir", "cache_key", "clear_cache", "format_text", "point", "report", "router",
           "tables", "view"]
