"""Measured kernel tables: the manifest with provenance, each table's rows with a log–log chart, and
the α–β fits of the measured all-reduces.

The tables come from NVIDIA's aiconfigurator-core 0.12.0 wheel (Apache-2.0), copied unmodified.
Pages read their query with the models of their JSON twins (`api.routes.measurements`), so
`/measurements/nccl?system=l40s` and `/api/v1/measurements/nccl?system=l40s` list the same rows.
For the communication tables the page draws latency against message size, log–log, one line per
GPU count, for one system, operation and dtype chosen in the form; on the fitted tables, when the
chart shows the rows that were fitted, each GPU count's fitted line T = a + M/b is drawn dashed in
its series' colour and the fits are listed below the chart. `/measurements/fits` lists every fit.
"""
from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import Query, Request
from starlette.responses import HTMLResponse

from api.routes.measurements import (
    FITS,
    BadFilter,
    MeasuredFitsQuery,
    MeasurementFilesQuery,
    MeasurementQuery,
    files_page,
    fitted_rows_url,
    rows_page,
    with_si,
)
from api.site.chart_layout import compact
from api.site.render import page_router, pager, problem_page, render, store_of, twin
from knowledge.measurements import MESSAGE_DTYPE, TABLES, UNITS
from knowledge.store import Store
from knowledge.measurements import FIT_METHOD, FITTED_TABLES

router = page_router()

#: columns offered as selects in a table's filter form (when the table has them), in this order
SELECTS = ("system", "framework", "op_name", "backend", "nccl_dtype", "allreduce_dtype", "gemm_dtype", "attn_dtype",
           "kv_cache_dtype", "moe_dtype", "distribution", "num_gpus")
#: chart defaults for a communication table: the filters the chart fixes and their preferred value
CHART_FIXED = {"nccl": {"op_name": "all_reduce", "nccl_dtype": "half"},
               "custom_allreduce": {"op_name": "all_reduce", "allreduce_dtype": "bfloat16", "backend": "vllm_graph"}}
W, H, ML, MR, MT, MB = 640, 300, 64, 16, 14, 46
#: points sampled along a fitted line (it is a curve on log–log axes)
FIT_SAMPLES = 48


@router.get("/measurements", response_class=HTMLResponse)
def measurements_page(request: Request, query: Annotated[MeasurementFilesQuery, Query()]) -> HTMLResponse:
    """The measured tables with their provenance: path in the wheel, sha256, license."""
    store = store_of(request)
    header, page = files_page(store, query)
    systems = sorted({f["system"] for f in store.measurement_files})
    return render(request, "measurements.html.j2", title="Measured kernel tables", twin=twin(request), header=header,
                  page=page, pager=pager(request, page), filters=query.filters(), systems=systems, tables=list(TABLES),
                  units=UNITS)


@router.get(f"/measurements/{FITS}", response_class=HTMLResponse)
def measured_fits_page(request: Request, query: Annotated[MeasuredFitsQuery, Query()]) -> HTMLResponse:
    """Every α–β fit of the measured all-reduces, with residuals and the measured file it came from."""
    store = store_of(request)
    page = query.run_fits(store)
    page.items = _shown_fits(page.items)
    systems = sorted({f["system"] for f in store.measurement_files if f["table"] in FITTED_TABLES})
    gpus = sorted({f["gpus"] for f in store.measured_fits(limit=1000).items})
    return render(request, "measurement_fits.html.j2", title="Fitted all-reduce α–β", twin=twin(request), page=page,
                  pager=pager(request, page), filters=query.filters(), systems=systems, tables=list(FITTED_TABLES),
                  gpu_counts=[str(g) for g in gpus], method=FIT_METHOD)


def _options(store: Store, table: str, columns: list[str]) -> dict[str, list[str]]:
    """Values offered by each select of the form."""
    out: dict[str, list[str]] = {}
    for col in SELECTS:
        if col == "framework":
            out[col] = sorted({f["framework"] for f in store.measurement_files if f["table"] == table})
        elif col in columns:
            out[col] = [str(v) for v in store.measured_distinct(table, col)]
    return out


def _chart(store: Store, table: str, query: MeasurementQuery, options: dict[str, list[str]]) -> dict[str, Any] | None:
    """Latency against message bytes, one series per GPU count, for one system and the fixed filters."""
    if table not in MESSAGE_DTYPE:
        return None
    systems = options.get("system") or []
    system = query.system or ("h100_sxm" if "h100_sxm" in systems else (systems[0] if systems else None))
    if system is None:
        return None
    fixed: dict[str, Any] = {"system": system}
    for col, preferred in CHART_FIXED[table].items():
        given = getattr(query, col)
        values = options.get(col) or []
        fixed[col] = given or (preferred if preferred in values else (values[0] if values else None))
    rows = store.measured_page(table, {k: v for k, v in fixed.items() if v is not None}, limit=5000).items
    series: dict[int, list[tuple[float, float]]] = {}
    for r in map(lambda r: with_si(table, r), rows):
        if query.num_gpus is not None and r.get("num_gpus") != query.num_gpus:
            continue
        x, y = r.get("message_bytes"), r.get("latency_s")
        if x and y and x > 0 and y > 0:
            series.setdefault(int(r["num_gpus"]), []).append((float(x), float(y)))
    if not series:
        return None
    named = [(f"{n} GPUs", sorted(pts)) for n, pts in sorted(series.items())]
    fits = _chart_fits(store, table, fixed)
    lines = [fits.get(n) for n in sorted(series)]
    caption = ", ".join(f"{k} {v}" for k, v in fixed.items() if v is not None)
    geo = loglog(named, "message size (bytes = elements × bytes per element)", "latency",
                 [(f["start_up_s"], f["algorithm_bytes_per_s"]) if f else None for f in lines])
    gpus_of = {f"{n} GPUs": n for n in series}
    for line in geo["fit_lines"]:
        line["gpus"] = gpus_of[line["name"]]
    rows = [(name, [(x, y, _fitted(f, x)) for x, y in pts]) for (name, pts), f in zip(named, lines, strict=True)]
    listed = [f for f in store.fits_of(system, table) if query.num_gpus in (None, f["gpus"])] if table in FITTED_TABLES else []
    return {"geo": geo, "caption": caption, "series": rows, "system": system, "fits_drawn": any(lines),
            "fits": _shown_fits(listed), "method": FIT_METHOD}


def _shown_fits(fits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fits as the fit table shows them: with the rows they came from and their message range in words."""
    return [{**f, "rows_url": f.get("rows_url") or fitted_rows_url(f),
             "message_range": f"{_bytes_label(f['message_bytes_min'])} – {_bytes_label(f['message_bytes_max'])}"}
            for f in fits]


def _chart_fits(store: Store, table: str, fixed: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """GPU count -> stored fit, when the chart shows exactly the rows fitted (same op, dtype, backend)."""
    if table not in FITTED_TABLES:
        return {}
    out = {}
    for f in store.fits_of(fixed["system"], table):
        shown = {"op_name": fixed.get("op_name"), "dtype": fixed.get(MESSAGE_DTYPE[table]),
                 "backend": fixed.get("backend") if f.get("backend") else None}
        if all(str(shown[k] or "").lower() == str(f.get(k) or "").lower() for k in shown):
            out[int(f["gpus"])] = f
    return out


def _fitted(fit: dict[str, Any] | None, message_bytes: float) -> float | None:
    """The fitted latency T = a + M/b of one message size (None without a fit)."""
    return fit["start_up_s"] + message_bytes / fit["algorithm_bytes_per_s"] if fit else None


def _decade_ticks(lo: float, hi: float, base: float) -> list[float]:
    """Powers of `base` within [lo, hi] (at most 9, thinned evenly)."""
    e0, e1 = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
    exps = list(range(e0, e1 + 1)) or [e0]
    step = max(1, math.ceil(len(exps) / 9))
    return [base ** e for e in exps[::step]]


def _bytes_label(v: float) -> str:
    for factor, unit in ((2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB")):
        if v >= factor:
            return f"{v / factor:g} {unit}"
    return f"{v:g} B"


def fit_curve(a: float, b: float, lo: float, hi: float, n: int = FIT_SAMPLES) -> list[tuple[float, float]]:
    """Points of T = a + M/b at `n` message sizes spaced evenly in log M over [lo, hi]."""
    if hi <= lo:
        return [(lo, a + lo / b)]
    step = (math.log(hi) - math.log(lo)) / (n - 1)
    return [(m, a + m / b) for m in (math.exp(math.log(lo) + i * step) for i in range(n))]


def loglog(series: list[tuple[str, list[tuple[float, float]]]], x_label: str, y_label: str,
           fits: list[tuple[float, float] | None] | None = None) -> dict[str, Any]:
    """SVG geometry of line series on log x (bytes, powers of 2) and log y (seconds, powers of 10) axes.

    `fits`, aligned with `series`, gives (a, b) of a fitted line T = a + M/b per series (or None): it is
    drawn over that series' message range in the series' colour (`fit_lines`)."""
    curves = [(j, fit_curve(*fit, min(x for x, _ in series[j][1]), max(x for x, _ in series[j][1])))
              for j, fit in enumerate(fits or []) if fit and series[j][1]]
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts] + [y for _, pts in curves for _, y in pts if y > 0]
    pw, ph = W - ML - MR, H - MT - MB
    ax, bx = math.log10(min(xs)), math.log10(max(xs))
    ay, by = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    bx = bx if bx > ax else ax + 1
    by = by if by > ay else ay + 1
    sx = lambda v: round(ML + (math.log10(v) - ax) / (bx - ax) * pw, 2)
    sy = lambda v: round(MT + ph - (math.log10(v) - ay) / (by - ay) * ph, 2)
    lines = []
    for j, (name, pts) in enumerate(series):
        seg = [(sx(x), sy(y)) for x, y in pts]
        lines.append({"points": " ".join(f"{x},{y}" for x, y in seg), "cls": f"s{j % 8}", "title": name,
                      "dots": seg if len(seg) <= 60 else []})
    fit_lines = [{"d": "M" + " L".join(f"{sx(x)},{sy(y)}" for x, y in pts if y > 0), "cls": f"s{j % 8}",
                  "title": f"{series[j][0]}: fitted T = a + M/b", "name": series[j][0]} for j, pts in curves]
    return {"width": W, "height": H, "left": ML, "top": MT, "right": ML + pw, "bottom": MT + ph, "x_label": x_label,
            "y_label": y_label, "lines": lines, "fit_lines": fit_lines, "legend": [{"name": n, "cls": f"s{j % 8}"} for j, (n, _) in enumerate(series)],
            "xticks": [{"pos": sx(t), "label": _bytes_label(t)} for t in _decade_ticks(min(xs), max(xs), 2 ** 4)],
            "yticks": [{"pos": sy(t), "label": compact(t, "s")} for t in _decade_ticks(10.0 ** ay, 10.0 ** by, 10)]}


@router.get("/measurements/{table}", response_class=HTMLResponse)
def measurement_table_page(request: Request, table: str, query: Annotated[MeasurementQuery, Query()]) -> HTMLResponse:
    """One measured table: filters, a chart for the communication tables, and a page of rows."""
    store = store_of(request)
    try:
        page = rows_page(store, table, query)
    except BadFilter as exc:
        errors = [{"field": f, "in": "query", "message": f"not a column of the {table} table"} for f in exc.fields]
        return problem_page(request, {"title": "Invalid request", "status": 422,
                                      "detail": f"invalid field(s): {', '.join(exc.fields)}", "errors": errors})
    columns = store.measured_columns[table]
    options = _options(store, table, columns)
    shown = [c for c in columns if c not in ("framework", "version", "device", "file")]
    extra = ["latency_s"] + (["message_bytes"] if table in MESSAGE_DTYPE else [])
    files = [f for f in store.measurement_files if f["table"] == table]
    numbers = [n for n in MeasurementQuery.exact if n not in SELECTS and n in columns]
    return render(request, "measurement_table.html.j2", title=f"Measured {table.replace('_', ' ')}", twin=twin(request),
                  table=table, page=page, pager=pager(request, page), filters=query.filters(), options=options,
                  numbers=numbers, shown=shown + extra, files=files, chart=_chart(store, table, query, options),
                  header=store.measurement_header, units=UNITS)
