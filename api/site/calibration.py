"""The calibration page: the measured step estimate against its peak-rate bound over a fixed grid, and the
leave-one-out error of the interpolation (`knowledge.calibration`, computed on the first request and cached per
data version). Its JSON twin is /api/v1/calibration (`api.routes.calibration`).

The chart is an inline SVG scatter, log–log: x = the bound, y = the measured kernel time, one colour per system,
with the line y = x (every kernel at its peak rate) and the line y = median ratio × x.
"""
from __future__ import annotations

import math
from typing import Any

from fastapi import Request
from starlette.responses import HTMLResponse

from api.site.chart_layout import compact
from api.site.render import page_router, render, store_of
from api.urls import urls
from knowledge.calibration import calibration_report

router = page_router()

W, H, ML, MR, MT, MB = 640, 480, 64, 16, 14, 46


def _decades(lo: float, hi: float) -> tuple[int, int]:
    """Whole powers of ten enclosing [lo, hi] (at least one decade apart)."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return a, b if b > a else a + 1


def scatter(rows: list[dict[str, Any]], median_ratio: float | None) -> dict[str, Any] | None:
    """SVG geometry of measured kernel time against bound (log–log), dots coloured by system, with y = x and
    y = median_ratio · x; None when no row has positive times."""
    pts = [r for r in rows if r.get("bound_s") and r.get("measured_s") and r["bound_s"] > 0 and r["measured_s"] > 0]
    if not pts:
        return None
    values = [r["bound_s"] for r in pts] + [r["measured_s"] for r in pts]
    lo, hi = _decades(min(values), max(values))
    pw, ph = W - ML - MR, H - MT - MB
    sx = lambda v: round(ML + (math.log10(v) - lo) / (hi - lo) * pw, 2)
    sy = lambda v: round(MT + ph - (math.log10(v) - lo) / (hi - lo) * ph, 2)
    systems = list(dict.fromkeys(r["system"] for r in pts))
    cls = {s: f"s{j % 8}" for j, s in enumerate(systems)}
    dots = [{"x": sx(r["bound_s"]), "y": sy(r["measured_s"]), "cls": cls[r["system"]],
             "title": f"{r['id']}: bound {r['bound_s']:.3g} s, measured {r['measured_s']:.3g} s, ratio {r['ratio']:.3g}"}
            for r in pts]
    x0, x1 = 10.0 ** lo, 10.0 ** hi
    lines = [{"name": "y = x (every kernel at its peak rate)", "cls": "ref", "x1": sx(x0), "y1": sy(x0), "x2": sx(x1),
              "y2": sy(x1)}]
    if median_ratio and median_ratio > 0:
        # y = k·x within the square: from x0 to x1 / k (the line leaves the top edge there)
        end = x1 / median_ratio if median_ratio > 1 else x1
        start = x0 if median_ratio > 1 else x0 / median_ratio
        lines.append({"name": f"y = {median_ratio:.3g} · x (median ratio)", "cls": "median", "x1": sx(start),
                      "y1": sy(start * median_ratio), "x2": sx(end), "y2": sy(end * median_ratio)})
    ticks = [{"pos_x": sx(10.0 ** e), "pos_y": sy(10.0 ** e), "label": compact(10.0 ** e, "s")}
             for e in range(lo, hi + 1)]
    return {"width": W, "height": H, "left": ML, "top": MT, "right": ML + pw, "bottom": MT + ph, "dots": dots,
            "lines": lines, "ticks": ticks, "legend": [{"name": s, "cls": cls[s]} for s in systems],
            "x_label": "peak-rate bound per step", "y_label": "measured kernel time per step"}


@router.get("/calibration", response_class=HTMLResponse)
def calibration_page(request: Request) -> HTMLResponse:
    """Bound against measured estimate over the grid, with the leave-one-out error of the interpolation."""
    report = calibration_report(store_of(request).lookup)
    median = report["summary"]["ratio"]["overall"]["median"]
    return render(request, "calibration.html.j2", title="Calibration of the measured estimate",
                  twin=urls.json_twin(urls.calibration()), report=report,
                  chart=scatter(report["configurations"], median), sources=report["sources"])
