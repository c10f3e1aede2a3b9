"""The validation page: `serving-estimate` against every stored benchmark point (`api.routes.validation`, computed
once per data version and cached), filtered like its JSON twin /api/v1/validation.

It shows the headline errors, the tables by source, hardware, model family, framework and load, a log–log scatter
of predicted against measured TPOT (inline SVG drawn here: one dot per point coloured by source, the line y = x
and the ±25 % band) and every row, linked to its benchmark page and to the calculator page computing its request.
"""
from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import Query, Request
from starlette.responses import HTMLResponse

from api.queries import BenchmarkFrameworkName
from api.routes import validation as V
from api.site.chart_layout import compact
from api.site.render import page_router, render, store_of, twin
from api.urls import urls

router = page_router()

W, H, ML, MR, MT, MB = 580, 480, 84, 16, 14, 46


def _decades(lo: float, hi: float) -> tuple[int, int]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return a, b if b > a else a + 1


def scatter(rows: list[dict[str, Any]], within: float) -> dict[str, Any] | None:
    """SVG geometry of predicted against measured TPOT (log–log, the same scale on both axes), one dot per compared
    point coloured by source, the line y = x and the band (1 ± within) · x; None when no point has both TPOTs."""
    pts = [r for r in rows if r["compared"] and (r["measured"].get("tpot_s") or 0) > 0
           and (r["predicted"].get("tpot_s") or 0) > 0 and math.isfinite(r["predicted"]["tpot_s"])]
    if not pts:
        return None
    values = [r["measured"]["tpot_s"] for r in pts] + [r["predicted"]["tpot_s"] for r in pts]
    lo, hi = _decades(min(values), max(values))
    pw, ph = W - ML - MR, H - MT - MB
    sx = lambda e: round(ML + (e - lo) / (hi - lo) * pw, 2)        # noqa: E731 - positions of log10 values
    sy = lambda e: round(MT + ph - (e - lo) / (hi - lo) * ph, 2)   # noqa: E731
    sources = list(dict.fromkeys(r["source"] for r in pts))
    cls = {s: f"s{j % 8}" for j, s in enumerate(sources)}
    dots = [{"x": sx(math.log10(r["measured"]["tpot_s"])), "y": sy(math.log10(r["predicted"]["tpot_s"])),
             "cls": cls[r["source"]], "id": r["id"], "url": r["page_url"],
             "title": f"{r['id']}: measured {r['measured']['tpot_s'] * 1e3:.3g} ms, predicted "
                      f"{r['predicted']['tpot_s'] * 1e3:.3g} ms ({r['errors']['tpot_s']:+.0%})"}
            for r in pts]
    up, down = math.log10(1 + within), math.log10(1 - within)       # the band's edges: Y = X + c in log10 space
    band = [(lo, lo + up), (hi - up, hi), (hi, hi), (hi, hi + down), (lo - down, lo), (lo, lo)]
    ticks = [{"pos_x": sx(e), "pos_y": sy(e), "label": compact(10.0 ** e, "s")} for e in range(lo, hi + 1)]
    return {"width": W, "height": H, "left": ML, "top": MT, "right": ML + pw, "bottom": MT + ph, "dots": dots,
            "diagonal": {"x1": sx(lo), "y1": sy(lo), "x2": sx(hi), "y2": sy(hi)},
            "band": " ".join(f"{sx(x)},{sy(y)}" for x, y in band), "within": within, "ticks": ticks,
            "legend": [{"name": s, "cls": cls[s], "n": sum(r["source"] == s for r in pts)} for s in sources],
            "x_label": "measured TPOT", "y_label": "predicted TPOT"}


def options(rep: dict[str, Any]) -> dict[str, list[str]]:
    """The values of each filter's select, from every row of the report."""
    rows = rep["rows"]

    def values(key: str) -> list[str]:
        return sorted({r[key] for r in rows if r.get(key)}, key=str.lower)

    return {"source": values("source"), "hardware": values("hardware"), "model": values("model"),
            "model_family": values("model_family"), "framework": [f.value for f in BenchmarkFrameworkName]}


@router.get("/validation", response_class=HTMLResponse)
def validation_page(request: Request, query: Annotated[V.ValidationQuery, Query()]) -> HTMLResponse:
    """Predicted against measured for every stored benchmark point, filtered like /api/v1/validation."""
    rep = V.report(store_of(request))
    v = V.view(rep, query)
    groups = [(name, label, v[name]) for name, (label, _) in V.GROUPS.items()]
    return render(request, "validation.html.j2", title="Validation of the serving estimate", twin=twin(request), v=v,
                  groups=groups, chart=scatter(v["rows"], v["within"]), filters=query.filters(), options=options(rep),
                  group_filter={"by_source": "source", "by_hardware": "hardware", "by_model_family": "model_family",
                                "by_framework": "framework"},
                  sources=sorted({r["source"] for r in v["rows"]}))
