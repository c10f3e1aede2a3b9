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

import threading
from typing import Annotated, Any, ClassVar

from fastapi import APIRouter, Depends, Path as PathParam, Query
from pydantic import Field

from api import schemas as S
from api.deps import get_store
from api.queries import BenchmarkFrameworkName, ListQuery
from api.responses import FastJSONResponse
from api.routes.common import NotFound
from api.urls import urls
from knowledge import serving_calibration as SC
from knowledge import validation as V
from knowledge.store import Store

router = APIRouter(tags=["benchmarks"])

#: the by_* tables of a report: key -> (label, the row's group)
GROUPS = V.GROUPS
METRICS = V.METRICS
METHOD = {
    "compared": "A point is compared when the store describes its deployment: model and accelerator records, "
                "framework vLLM, SGLang or TensorRT-LLM, a closed-loop, Poisson, MLPerf Server or offline load, and "
                "published mean input and output lengths; every other point is listed with the reason.",
    "request": "Each compared point becomes one serving-estimate request; the rules used (fp4 by vendor, "
               "range-ratio means, finite runs, ep not stated) are listed in the row's mapping.",
    "error": "predicted / measured - 1: positive is an estimate slower (TPOT, TTFT) or faster (tokens/s) than the "
             "measurement. Medians are of |error|; within_25_percent is the share with |error| <= 0.25.",
    "calibration": "The tables overall and by_* are the uncalibrated estimate (calibration 'none'). "
                   "leave_one_source_out holds the same tables for the calibrated estimate, each source's points "
                   "estimated with factors fitted on the other sources only (a point whose hardware no other source "
                   "measured keeps the uncalibrated estimate; its row's loso.note says so). " + SC.MODEL,
    "bound": "bound_below_measured: whether the estimate's peak-rate floor (bound_tpot_s) is at or below the "
             "measured TPOT, as a floor must be.",
    "target": "Issue #25: median |TPOT error| <= 15 %, >= 70 % of points within 25 %, median |tokens/s per device "
              "error| <= 20 %, measured leaving each source out, and the floor below the measured TPOT on every point.",
}

_CACHE: dict[str, dict[str, Any]] = {}
_LOCK = threading.Lock()

code_digest = V.code_digest
cache_key = V.cache_key
cache_dir = V.cache_dir


# --------------------------------------------------------------------------- the cached report

def _enrich(report: dict[str, Any], store: Store) -> dict[str, Any]:
    """The report with what each row's page needs: published names, model family, its links."""
    for row in report["rows"]:
        rec = store.get("benchmark", row["id"]) or {}
        row["model_hf"], row["hardware_name"] = rec.get("model_hf"), rec.get("hardware_name")
        row["devices"] = rec.get("devices")
        row["model_family"] = V.family_of(V.Row(**_row_fields(row)))
        row["run_half"] = V.run_half_of(V.Row(**_row_fields(row)))
        row["page_url"], row["api_url"] = urls.benchmark(row["id"]), urls.api_item("benchmark", row["id"])
        row["validation_url"] = urls.api_validation_point(row["id"])
        row["calculator_url"] = urls.calculator("serving-estimate", row["request"]) if row.get("compared") else None
    return report


def report(store: Store) -> dict[str, Any]:
    """The validation report of `store` (computed at most once per store version and code, by
    `knowledge.validation.cached_report`, else read from memory or from its persisted copy). Shared: callers must
    not modify it."""
    key = cache_key(store)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    with _LOCK:
        hit = _CACHE.get(key)
        if hit is None:
            hit = _enrich(V.cached_report(store), store)
            _CACHE[key] = hit
    return hit


def clear_cache() -> None:
    """Forget the reports computed in this process (their persisted copies stay)."""
    with _LOCK:
        _CACHE.clear()
    V.clear_cache()


# --------------------------------------------------------------------------- filtered views

_ROW_FIELDS = frozenset(V.Row.__dataclass_fields__)


def _row_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k in _ROW_FIELDS}


def tables(rows: list[dict[str, Any]], calibrated: bool = False) -> dict[str, Any]:
    """overall and the by_* tables over `rows` (those not compared count nowhere); `calibrated`: of their
    leave-one-source-out estimates."""
    return V.tables([V.Row(**_row_fields(r)) for r in rows], calibrated)


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
            **V.calibrated_views([V.Row(**_row_fields(r)) for r in rows]), "calibration": rep["calibration"],
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


def _target_value(v: Any) -> str:
    return v if isinstance(v, str) else _pct(v)


def format_text(v: dict[str, Any]) -> str:
    """The answer as the tables `casebook validate` prints: uncalibrated beside leave-one-source-out calibrated."""
    o, c = v["overall"], v["leave_one_source_out"]["overall"]
    lines = [f"serving-estimate against published measurements: {v['compared']} of {v['points']} points compared"
             + (f" ({v['stored']} stored; filters {v['filters']})" if v["filters"] else ""),
             "  uncalibrated | calibrated, each source's points with factors fitted on the other sources only",
             f"  median |TPOT error| {_pct(o['tpot_s']['median_abs_error'])} | {_pct(c['tpot_s']['median_abs_error'])}"
             f" over {o['tpot_s']['n']} points, within ±25 %: {_pct(o['tpot_s']['within_25_percent'])} | "
             f"{_pct(c['tpot_s']['within_25_percent'])}",
             f"  median |tokens/s per device error| {_pct(o['output_tokens_per_s_per_device']['median_abs_error'])} | "
             f"{_pct(c['output_tokens_per_s_per_device']['median_abs_error'])} over "
             f"{o['output_tokens_per_s_per_device']['n']}, within ±25 %: "
             f"{_pct(o['output_tokens_per_s_per_device']['within_25_percent'])} | "
             f"{_pct(c['output_tokens_per_s_per_device']['within_25_percent'])}",
             f"  median |TTFT error| {_pct(o['ttft_s']['median_abs_error'])} | {_pct(c['ttft_s']['median_abs_error'])}"
             f" over {o['ttft_s']['n']}",
             f"  bound at or below the measured TPOT: {o['bound_below_measured']['holds']} of "
             f"{o['bound_below_measured']['n']}",
             "", "issue #25 targets (uncalibrated | leave-one-source-out)"]
    yes = {True: "met", False: "NOT met", None: "—"}
    for t in v["targets"]:
        lines.append(f"  {t['what']:58} {t['target']:>12}   {_target_value(t['uncalibrated']):>8} "
                     f"{yes[t['met_uncalibrated']]:>8} | {_target_value(t['leave_one_source_out']):>8} "
                     f"{yes[t['met_leave_one_source_out']]:>8}")
    head = (f"{'':40} {'points':>6}  {'TPOT n':>6} {'|err|':>13} {'±25%':>11}  {'tok/s n':>7} {'|err|':>13} "
            f"{'±25%':>11}  {'TTFT n':>6} {'|err|':>13}")
    for name, (label, _) in GROUPS.items():
        lines += ["", f"by {label}", head + "   (uncalibrated|leave-one-source-out)"]
        for g, e in v[name].items():
            k = v["leave_one_source_out"][name].get(g) or e
            cols = []
            for m in METRICS:
                a, b = e[m], k[m]
                cols.append(f"{a['n']:6} {_pct(a['median_abs_error']):>6}|{_pct(b['median_abs_error']):<6}")
                if m != "ttft_s":
                    cols[-1] += f" {_pct(a['within_25_percent']):>5}|{_pct(b['within_25_percent']):<5}"
            lines.append(f"{g[:40]:40} {e['points']:6}  {cols[0]}  {cols[1]}  {cols[2]}")
    cal = v.get("calibration") or {}
    applied = set(cal.get("applied") or [])
    if cal.get("factors"):
        lines += ["", "factors fitted on every source (applied: " + (", ".join(cal.get("applied_bases") or []) or "none")
                  + " step times; LOSO = the group's points, each estimated without its own source, as if applied)"]
        for key, f in cal["factors"].items():
            lo = f.get("leave_one_source_out") or {}
            lines.append(f"  {key:34} × {f['factor']:.3g} on {f['points']:3} points from {', '.join(f['sources'])}"
                         f"{'' if key in applied else ' (not applied)'}; LOSO |err| TPOT "
                         f"{_pct((lo.get('tpot_s') or {}).get('median_abs_error'))}, tokens/s "
                         f"{_pct((lo.get('output_tokens_per_s_per_device') or {}).get('median_abs_error'))}")
        every = cal.get("if_every_factor_applied") or {}
        if every:
            lines.append(f"  if every factor were applied (measured-kernel ones too), leaving each source out: TPOT "
                         f"{_pct(every['tpot_s']['median_abs_error'])}, tokens/s per device "
                         f"{_pct(every['output_tokens_per_s_per_device']['median_abs_error'])}")
    notes: dict[str, int] = {}
    for r in v["rows"]:
        note = (r.get("loso") or {}).get("note")
        if note:
            notes[note] = notes.get(note, 0) + 1
    if notes:
        lines += ["", "points without a factor in their fold"]
        lines += [f"  {n:3} × {why}" for why, n in sorted(notes.items(), key=lambda kv: (-kv[1], kv[0]))]
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
                        "`by_source`, `by_hardware`, `by_model_family`, `by_framework`, `by_load`, `by_run_date` "
                        "(half-year of the run): points, median |error| and the share within ±25 % per metric. The "
                        "filters keep some rows and the tables are recomputed over them. Computed once per data version (tens of seconds the first time), then "
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
