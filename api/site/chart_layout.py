"""Chart geometry: a `ChartData` (from `api.site.charts`) as axes, ticks, polylines and rectangles in
SVG user units, which `templates/_chart.html.j2` draws; and the chart's numbers as a table.

Kept apart from the extraction so that neither module grows past a screenful of concerns: this
one knows nothing about calculators, only about points and bars.
"""
from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

from api.site.charts import ChartData

#: most points drawn per line and bars per chart (longer sweeps are thinned evenly for drawing)
MAX_POINTS = 400
MAX_BARS = 40

# --------------------------------------------------------------------------- layout

W, H = 640, 300
ML, MR, MT, MB = 64, 16, 14, 46


def _nice(span: float) -> float:
    """A round tick step (1, 2 or 5 × 10ⁿ) for a span."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    exp = math.floor(math.log10(span))
    f = span / 10 ** exp
    step = 1 if f <= 1 else 2 if f <= 2 else 5 if f <= 5 else 10
    return step * 10 ** exp


def ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About `count` round tick values covering [lo, hi]."""
    step = _nice((hi - lo) / max(count, 1))
    start = math.floor(lo / step) * step
    out, t = [], start
    while t <= hi + step * 1e-9 and len(out) < 50:
        if t >= lo - step * 1e-9:
            out.append(round(t, 12))
        t += step
    return out


def compact(v: float, unit: str = "") -> str:
    """Tick labels: SI prefixes for large values (k = 10³ … decimal); ms/µs/ns for seconds."""
    a = abs(v)
    if a == 0:
        return "0"
    if unit == "s":
        for factor, suffix in ((1.0, " s"), (1e-3, " ms"), (1e-6, " µs"), (1e-9, " ns")):
            if a >= factor * 0.9999999:
                return f"{v / factor:.3g}{suffix}"
        return f"{v:.2e} s"
    for factor, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= factor:
            return f"{v / factor:.3g}{suffix}"
    if a >= 0.01:
        return f"{v:.3g}"
    return f"{v:.2e}"


def _thin(n: int, limit: int) -> list[int]:
    """At most `limit` evenly spread indices of n points (first and last kept)."""
    if n <= limit:
        return list(range(n))
    step = (n - 1) / (limit - 1)
    return sorted({round(i * step) for i in range(limit)})


def _geometric(xs: list[float]) -> bool:
    """Are the x values spread by factors (1, 2, 4, 8 …) rather than by steps? Then draw a log axis."""
    pts = sorted({x for x in xs if math.isfinite(x)})
    if len(pts) < 3 or pts[0] <= 0 or pts[-1] / pts[0] < 8:
        return False

    def spread(v: list[float]) -> float:
        diffs = [b - a for a, b in pairwise(v)]
        mean = sum(diffs) / len(diffs)
        return (sum((d - mean) ** 2 for d in diffs) / len(diffs)) ** 0.5 / mean if mean else math.inf

    return spread([math.log(p) for p in pts]) < spread(pts)


def _marker(geo: dict, x: float, label: str, hl: bool = False, bar: bool = False) -> None:
    """Add a labelled vertical marker at x (label on the side with more room)."""
    right_half = x > (geo["left"] + geo["right"]) / 2
    geo["markers"].append({"x": round(x, 2), "label": label, "hl": hl, "bar": bar,
                           "tx": round(x - 3 if right_half else x + 3, 2), "anchor": "end" if right_half else "start"})


def layout(d: ChartData, width: int = W, height: int = H) -> dict:
    """Geometry for the template: all coordinates in SVG user units."""
    pw, ph = width - ML - MR, height - MT - MB
    geo: dict[str, Any] = {"width": width, "height": height, "left": ML, "top": MT, "right": ML + pw,
                           "bottom": MT + ph, "kind": d.kind, "title": d.title, "x_label": d.x_label,
                           "y_label": d.y_label, "lines": [], "bars": [], "markers": [], "xticks": [],
                           "yticks": [], "legend": [], "note": d.note, "log_x": False}
    if d.kind == "stacked-bar":
        idx = _thin(len(d.bars_x), MAX_BARS)
        totals = [sum((p.ys[i] or 0.0) for p in d.parts) for i in idx]
        ymax = max(totals + [0.0])
        yt = ticks(0.0, ymax or 1.0)
        ytop = max(yt[-1], ymax) or 1.0
        sy = lambda v: MT + ph - (v / ytop) * ph
        band = pw / max(len(idx), 1)
        bw = max(band * 0.7, 1.0)
        for k, i in enumerate(idx):
            x0 = ML + k * band + (band - bw) / 2
            acc = 0.0
            xval = d.bars_x[i]
            label = d.bar_labels[i] if i < len(d.bar_labels) else compact(xval)
            hl = d.highlight_x is not None and not d.bar_labels and math.isclose(xval, d.highlight_x, rel_tol=1e-9)
            mark = next((lbl for m, lbl in d.markers if not d.bar_labels and math.isclose(xval, m, rel_tol=1e-9)), None)
            for j, p in enumerate(d.parts):
                v = p.ys[i] or 0.0
                if v <= 0:
                    continue
                y1, y0 = sy(acc), sy(acc + v)
                geo["bars"].append({"x": round(x0, 2), "y": round(y0, 2), "w": round(bw, 2), "h": round(max(y1 - y0, 0.5), 2),
                                    "cls": f"s{j % 8}", "title": f"{p.name} at {label}: {compact(v, d.y_unit)}"})
                acc += v
            if len(idx) <= 16 or k % max(1, len(idx) // 8) == 0:
                geo["xticks"].append({"pos": round(x0 + bw / 2, 2), "label": label, "hl": hl or mark is not None})
            geo["bars"].append({"total": True, "x": round(x0 + bw / 2, 2), "y": round(sy(acc) - 3, 2),
                                "label": compact(acc, d.y_unit)} if len(idx) <= 12 and acc > 0 else {"skip": True})
            if hl or mark is not None:
                _marker(geo, x0 + bw / 2, "your request" if hl else mark, hl=hl, bar=True)
        geo["bars"] = [b for b in geo["bars"] if not b.get("skip")]
        geo["yticks"] = [{"pos": round(sy(t), 2), "label": compact(t, d.y_unit)} for t in yt]
        geo["legend"] = [{"name": p.name, "cls": f"s{j % 8}"} for j, p in enumerate(d.parts)]
        return geo

    xs_all = [x for s in d.series for x in s.xs if math.isfinite(x)]
    ys_all = [y for s in d.series for y in s.ys if y is not None]
    if not xs_all or not ys_all:
        return geo
    xlo, xhi = min(xs_all), max(xs_all)
    log_x = _geometric(xs_all)
    lx = math.log2 if log_x else (lambda v: v)
    a, b = lx(xlo), lx(xhi)
    if a == b:
        a, b = a - 1, b + 1
    sx = lambda v: ML + (lx(v) - a) / (b - a) * pw
    ylo, yhi = min(ys_all + [0.0]), max(ys_all)
    if ylo == yhi:
        yhi = ylo + (abs(ylo) or 1.0)
    yt = ticks(ylo, yhi)
    ybot, ytop = min(yt[0], ylo), max(yt[-1], yhi)
    sy = lambda v: MT + ph - (v - ybot) / (ytop - ybot) * ph
    for j, s in enumerate(d.series):
        idx = _thin(len(s.xs), MAX_POINTS)
        segments, cur = [], []
        for i in idx:
            x, y = s.xs[i], s.ys[i]
            if y is None or not math.isfinite(x) or (log_x and x <= 0):
                if cur:
                    segments.append(cur)
                cur = []
                continue
            cur.append((round(sx(x), 2), round(sy(y), 2)))
        if cur:
            segments.append(cur)
        for seg in segments:
            geo["lines"].append({"points": " ".join(f"{x},{y}" for x, y in seg), "cls": f"s{j % 8}",
                                 "constant": s.constant, "dots": [] if len(seg) > 40 or s.constant else seg,
                                 "title": s.name})
        geo["legend"].append({"name": s.name + (" (constant)" if s.constant else ""), "cls": f"s{j % 8}"})
    if log_x:
        e0, e1 = math.floor(a), math.ceil(b)
        step = max(1, math.ceil((e1 - e0) / 8))
        xt = [2.0 ** e for e in range(e0, e1 + 1, step) if xlo * 0.999999 <= 2.0 ** e <= xhi * 1.000001]
        if len(xt) < 2:
            xt = [xlo, xhi]
    else:
        xt = [t for t in ticks(xlo, xhi, 6) if xlo - 1e-12 <= t <= xhi + 1e-12]
    geo["xticks"] = [{"pos": round(sx(t), 2), "label": compact(t), "hl": False} for t in xt]
    geo["yticks"] = [{"pos": round(sy(t), 2), "label": compact(t, d.y_unit)} for t in yt]
    for m, label in d.markers:
        if xlo <= m <= xhi and (not log_x or m > 0):
            _marker(geo, sx(m), f"{label}: {compact(m)}")
    if d.highlight_x is not None and xlo <= d.highlight_x <= xhi and (not log_x or d.highlight_x > 0):
        _marker(geo, sx(d.highlight_x), "your request", hl=True)
    geo["log_x"] = log_x
    return geo


def table_rows(d: ChartData, limit: int = 60) -> tuple[list[str], list[list[str]]]:
    """The chart's numbers as a small table (for screen readers, print and copying)."""
    src = d.parts if d.kind == "stacked-bar" else d.series
    xs = d.bars_x if d.kind == "stacked-bar" else (src[0].xs if src else [])
    head = [d.x_label] + [s.name for s in src]
    rows = []
    for i in _thin(len(xs), limit):
        rows.append([d.bar_labels[i] if i < len(d.bar_labels) else f"{xs[i]:.6g}"] + [("—" if s.ys[i] is None else f"{s.ys[i]:.6g}") if i < len(s.ys) else "—" for s in src])
    return head, rows
