"""Chart geometry: a `ChartData` (from `api.site.charts`) as axes, ticks, polylines and rectangles in
SVG user units, which `api/templates/_chart.html.j2` draws; and the chart's numbers as a table.

Kept apart from the extraction so that neither module grows past a screenful of concerns: this
one knows nothing about calculators, only about points, bars and units.

Rules a reader can rely on:
- **Axes are linear** unless the x values are positive, spread by factors (1, 2, 4, 8 … rather than by
  equal steps) and span at least two decades (×100), or the chart asks for a log axis (`x_scale="log"`);
  the axis label then says "log scale". A quantity that grows linearly therefore looks linear.
- **Every axis with a unit says it twice**: in the label, with the prefix and, for bytes, the base
  ("KV cache (GB, decimal)"), and on every tick ("20 GB"). Money reads "$0.02" on an axis labelled USD.
- **Limits are drawn**: a budget or capacity is a dashed level line with its value; points of candidates
  that do not fit are hollow, the segments touching them dashed, with a legend entry "does not fit".
- **Text stays readable on a phone**: coordinates are fixed (viewBox 640 × 320) and font sizes come from
  the stylesheet per screen width; positions that depend on text height use `em` offsets.
"""
from __future__ import annotations

import math
import re
from itertools import pairwise
from typing import Any

import numpy as np

from api.site.charts import ChartData

#: most points drawn per line and bars per chart (longer sweeps are thinned evenly for drawing)
MAX_POINTS = 400
MAX_BARS = 40

# --------------------------------------------------------------------------- layout

W, H = 640, 320
ML, MR, MT, MB = 88, 18, 34, 56
#: widest character of a tick label, in user units, at the phone font size (21 units: see site.css)
CHAR_W = 12.5

# --------------------------------------------------------------------------- units

#: per unit: (factor, prefixed unit) from the largest; the axis picks one for all its ticks
UNITS: dict[str, tuple[tuple[float, str], ...]] = {
    "B": ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B")),
    "B:binary": ((2.0**50, "PiB"), (2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B")),
    "B/s": ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")),
    "bit/s": ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s"), (1.0, "bit/s")),
    "FLOP/s": ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1.0, "FLOP/s")),
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")),
    "": ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1.0, "")),
}
#: words a label may already carry for its unit (dropped from the label before the unit is added)
UNIT_WORDS = {"s", "seconds", "b", "bytes", "b/s", "bytes/s", "usd", "bit/s", "flop/s"}


def _table(unit: str, base: str = "decimal") -> tuple[tuple[float, str], ...]:
    if unit == "B" and base == "binary":
        return UNITS["B:binary"]
    return UNITS.get(unit, UNITS[""])


def _pick(vmax: float, unit: str, base: str) -> tuple[float, str]:
    """The prefixed unit for values up to vmax: the largest factor vmax reaches (the smallest below)."""
    table = _table(unit, base)
    for factor, name in table:
        if vmax >= factor * 0.9999999:
            return factor, name
    return table[-1]


def _digits(x: float) -> str:
    """A scaled tick value: up to 4 significant figures, thousands separators, no trailing zeros."""
    if x == 0:
        return "0"
    if 1e5 <= abs(x) < 1e7:
        return f"{x:,.0f}"
    if abs(x) >= 1e7 or abs(x) < 1e-3:
        return f"{x:.3g}"
    s = f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"
    return s


def _with_unit(x: float, name: str, unit: str) -> str:
    if unit == "USD":
        return ("−$" if x < 0 else "$") + _digits(abs(x))
    if unit == "":
        return _digits(x) + name
    return f"{_digits(x)} {name}"


def fmt_value(v: float, unit: str = "", base: str = "decimal") -> str:
    """One value with its own best prefix: `20.5 GB`, `4.2 ms`, `$0.013`, `131,072`."""
    if v == 0:
        return "0" if unit not in ("USD",) else "$0"
    if unit == "USD":
        return _with_unit(v, "", unit) if abs(v) >= 0.01 else ("$" + f"{v:.2g}")
    if unit == "" and abs(v) < 1e6:
        return _digits(v) if abs(v) < 1e5 else f"{v:,.0f}"
    factor, name = _pick(abs(v), unit, base)
    return _with_unit(v / factor, name, unit)


def axis_label(label: str, unit: str, base: str, name: str) -> str:
    """`label (GB, decimal)`: the label with its prefixed unit (and base for bytes), once."""
    text = label.strip()
    if unit:
        if text.endswith(")") and "(" in text and text[text.rindex("(") + 1:-1].strip().lower() in UNIT_WORDS:
            text = text[:text.rindex("(")].rstrip()
        if unit == "s" and text.lower().startswith("seconds"):
            text = "time" + text[len("seconds"):]
    if not unit or (unit == "USD" and "usd" in text.lower()):
        return text
    if unit == "B":
        return f"{text} ({name}, {base})"
    return f"{text} ({name or unit})"


def axis(lo: float, hi: float, unit: str, base: str = "decimal", count: int = 5) -> tuple[list[tuple[float, str]], str]:
    """Linear ticks (value, label) covering [lo, hi] in one prefixed unit, and that unit's name."""
    if unit == "USD":
        return [(t, fmt_value(t, "USD")) for t in ticks(lo, hi, count)], "USD"
    factor, name = _pick(max(abs(lo), abs(hi)), unit, base)
    return [(t * factor, _with_unit(t, name, unit)) for t in ticks(lo / factor, hi / factor, count)], name


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
    """A value for a tooltip or a bar total: its own best prefix and unit (kept for callers of the old name)."""
    return fmt_value(v, unit)


def _thin(n: int, limit: int) -> list[int]:
    """At most `limit` evenly spread indices of n points (first and last kept)."""
    if n <= limit:
        return list(range(n))
    step = (n - 1) / (limit - 1)
    return sorted({round(i * step) for i in range(limit)})


def _geometric(xs: list[float]) -> bool:
    """Are the x values spread by factors (1, 2, 4, 8 …) rather than by steps?"""
    pts = sorted({x for x in xs if math.isfinite(x)})
    if len(pts) < 3 or pts[0] <= 0:
        return False

    def spread(v: list[float]) -> float:
        diffs = [b - a for a, b in pairwise(v)]
        mean = sum(diffs) / len(diffs)
        return (sum((d - mean) ** 2 for d in diffs) / len(diffs)) ** 0.5 / mean if mean else math.inf

    return spread([math.log(p) for p in pts]) < spread(pts)


def use_log_x(xs: list[float], scale: str = "auto") -> bool:
    """The module's rule: log only when asked (`log`, positive values spanning ≥ ×8) or, for `auto`, when
    the values are positive, geometric and span two decades or more; linear otherwise."""
    pts = [x for x in xs if math.isfinite(x)]
    if scale == "linear" or not pts or min(pts) <= 0:
        return False
    span = max(pts) / min(pts)
    if scale == "log":
        return span >= 8
    return span >= 100 and _geometric(pts)


def _x_ticks(xs: list[float], sx, lo: float, hi: float, unit: str, base: str, pw: float) -> tuple[list[tuple[float, str]], str]:
    """x ticks: the sweep's own values when they are few and far enough apart, else round values,
    as many as fit side by side at the phone font size."""
    pts = sorted({x for x in xs if math.isfinite(x)})
    _, name = _pick(max(abs(lo), abs(hi)), unit, base)
    if 2 <= len(pts) <= 10:
        own = [(x, fmt_value(x, unit, base)) for x in pts]
        widest = max(len(label) for _, label in own) * CHAR_W + 8
        if all(sx(b) - sx(a) >= widest for (a, _), (b, _) in pairwise(own)):
            return own, name
    for count in (6, 5, 4, 3, 2):
        tks, name = axis(lo, hi, unit, base, count)
        tks = [(t, label) for t, label in tks if lo - 1e-12 * max(1.0, abs(lo)) <= t <= hi * (1 + 1e-12) + 1e-12]
        widest = max((len(label) for _, label in tks), default=1) * CHAR_W + 8
        if len(tks) < 2 or all(sx(b) - sx(a) >= widest for (a, _), (b, _) in pairwise(tks)):
            return tks, name
    return [(lo, fmt_value(lo, unit, base)), (hi, fmt_value(hi, unit, base))], name


def _marker(geo: dict, x: float, label: str, hl: bool = False, bar: bool = False) -> None:
    """Add a labelled vertical marker at x (label on the side with more room; rows stack in em)."""
    right_half = x > (geo["left"] + geo["right"]) / 2
    dy = 1.1 + geo.get("marker_shift", 0.0) + 1.2 * len(geo["markers"])
    geo["markers"].append({"x": round(x, 2), "label": label, "hl": hl, "bar": bar, "dy": round(dy, 2),
                           "tx": round(x - 4 if right_half else x + 4, 2), "anchor": "end" if right_half else "start"})


def _base_geo(d: ChartData, width: int, height: int) -> dict[str, Any]:
    return {"width": width, "height": height, "left": ML, "top": MT, "right": width - MR, "bottom": height - MB,
            "kind": d.kind, "title": d.title, "x_label": d.x_label, "y_label": d.y_label, "lines": [], "bars": [],
            "markers": [], "limits": [], "xticks": [], "yticks": [], "legend": [], "note": d.note, "log_x": False,
            "marker_top": MT,
            "nofit": False}


def layout(d: ChartData, width: int = W, height: int = H) -> dict:
    """Geometry for the template: all coordinates in SVG user units."""
    geo = _base_geo(d, width, height)
    pw, ph = geo["right"] - ML, geo["bottom"] - MT
    if d.kind == "stacked-bar":
        return _bars(d, geo, pw, ph)
    xs_all = [x for s in d.series for x in s.xs if math.isfinite(x)]
    ys_all = [y for s in d.series for y in s.ys if y is not None]
    if not xs_all or not ys_all:
        return geo
    xlo, xhi = min(xs_all), max(xs_all)
    log_x = use_log_x(xs_all, d.x_scale)
    lx = math.log2 if log_x else (lambda v: v)
    a, b = lx(xlo), lx(xhi)
    if a == b:
        a, b = a - 1, b + 1
    sx = lambda v: ML + (lx(v) - a) / (b - a) * pw
    ylo, yhi = min(ys_all + [0.0]), max(ys_all)
    shown_limits = [(v, label) for v, label in d.limits if v <= 20 * max(yhi, 1e-300)]
    hidden = [(v, label) for v, label in d.limits if (v, label) not in shown_limits]
    yhi = max([yhi] + [v * 1.04 for v, _ in shown_limits])
    if ylo == yhi:
        yhi = ylo + (abs(ylo) or 1.0)
    yt, y_name = axis(ylo, yhi, d.y_unit, d.base)
    ybot, ytop = min(yt[0][0], ylo), max(yt[-1][0], yhi + 0.04 * (yhi - ylo) if yhi > yt[-1][0] else yhi)
    sy = lambda v: MT + ph - (v - ybot) / (ytop - ybot) * ph
    for j, s in enumerate(d.series):
        _draw_series(geo, s, *_colour(d.series, j), sx, sy, log_x)
    if any(s.fits and not all(s.fits) for s in d.series):
        geo["nofit"] = True
        geo["legend"].append({"name": "does not fit (hollow point, dashed line)", "cls": "nofit"})
    if log_x:
        e0, e1 = math.floor(a), math.ceil(b)
        step = max(1, math.ceil((e1 - e0) / 6))
        xt = [2.0 ** e for e in range(e0, e1 + 1, step) if xlo * 0.999999 <= 2.0 ** e <= xhi * 1.000001] or [xlo, xhi]
        xticks = [(t, fmt_value(t, d.x_unit, d.base)) for t in xt]
        x_name = ""
    else:
        xticks, x_name = _x_ticks(xs_all, sx, xlo, xhi, d.x_unit, d.base, pw)
    geo["xticks"] = [{"pos": round(sx(t), 2), "label": label, "hl": False} for t, label in xticks]
    geo["yticks"] = [{"pos": round(sy(t), 2), "label": label} for t, label in yt]
    geo["y_label"] = axis_label(d.y_label, d.y_unit, d.base, y_name)
    geo["x_label"] = axis_label(d.x_label, d.x_unit, d.base, x_name) if not log_x or not d.x_unit else \
        axis_label(d.x_label, "", d.base, "") + (f" ({d.base})" if d.x_unit == "B" else "")
    geo["marker_top"] = MT
    for v, label in shown_limits:
        pos = round(sy(v), 2)
        near_top = pos < MT + 45   # label below the line, and marker labels below that
        geo["limits"].append({"y": pos, "label": f"{label}: {fmt_value(v, d.y_unit, d.base)}", "x": geo["right"] - 4,
                              "dy": "1.1em" if near_top else "-0.35em"})
        if near_top:
            geo["marker_top"], geo["marker_shift"] = pos, 1.3
    for v, label in hidden:
        geo["limits"].append({"y": None, "label": f"{label}: {fmt_value(v, d.y_unit, d.base)}, above this range (not drawn to scale)",
                              "x": geo["right"] - 4})
    for m, label in d.markers:
        if xlo <= m <= xhi and (not log_x or m > 0):
            _marker(geo, sx(m), f"{label}: {fmt_value(m, d.x_unit, d.base)}")
    if d.highlight_x is not None and xlo <= d.highlight_x <= xhi and (not log_x or d.highlight_x > 0):
        _marker(geo, sx(d.highlight_x), "your request", hl=True)
    geo["log_x"] = log_x
    return geo


def _colour(series: list, j: int) -> tuple[int, str]:
    """(colour index, extra class) of series j. Series named `key (value)` for several values (one line per
    kv_format …) share a colour per value; a second key of the same value is drawn lighter ("minor")."""
    groups = [re.match(r"^(.*) \((.+)\)$", s.name) for s in series]
    values = list(dict.fromkeys(m.group(2) for m in groups if m))
    keys = list(dict.fromkeys(m.group(1) for m in groups if m))
    if not all(groups) or len(values) < 2 or len(keys) < 2:
        return j, ""
    m = groups[j]
    return values.index(m.group(2)), "minor" if keys.index(m.group(1)) > 0 else ""


def _draw_series(geo: dict, s, j: int, extra: str, sx, sy, log_x: bool) -> None:
    """Polylines of one series (split at gaps, and where fitting changes), its dots and legend entry."""
    cls = f"s{j % 8}" + (f" {extra}" if extra else "")
    idx = _thin(len(s.xs), MAX_POINTS)
    fits = s.fits if s.fits and len(s.fits) == len(s.xs) else None
    pts = []  # (x, y, fits) or None for a gap
    for i in idx:
        x, y = s.xs[i], s.ys[i]
        if y is None or not math.isfinite(x) or (log_x and x <= 0):
            pts.append(None)
            continue
        pts.append((round(sx(x), 2), round(sy(y), 2), True if fits is None else bool(fits[i])))
    runs: list[tuple[bool, list]] = []  # (segment fits, points)
    for p, q in pairwise(pts):
        if p is None or q is None:
            continue
        ok = p[2] and q[2]
        if runs and runs[-1][0] == ok and runs[-1][1][-1] == p:
            runs[-1][1].append(q)
        else:
            runs.append((ok, [p, q]))
    drawn = {p for _, run in runs for p in run}
    runs += [(p[2], [p]) for p in pts if p is not None and p not in drawn]  # isolated points
    dots = len([p for p in pts if p]) <= 40 and not s.constant
    for ok, run in runs:
        geo["lines"].append({"points": " ".join(f"{x},{y}" for x, y, _ in run), "cls": cls, "constant": s.constant,
                             "nofit": not ok, "style": s.style, "title": s.name + ("" if ok else " (does not fit)"),
                             "dots": []})
    if dots:
        seen = set()
        for p in pts:
            if p is not None and p not in seen:
                seen.add(p)
                geo["lines"][-1]["dots"].append({"x": p[0], "y": p[1], "hollow": not p[2]})
    name = s.name + (" (constant)" if s.constant else "") + (" (what-if)" if s.style == "what-if" and "what-if" not in s.name else "")
    geo["legend"].append({"name": name, "cls": cls, "style": s.style})


def _bars(d: ChartData, geo: dict, pw: float, ph: float) -> dict:
    """Stacked bars: one per x (or per labelled variant), parts bottom-up, totals on top when few."""
    idx = _thin(len(d.bars_x), MAX_BARS)
    totals = [sum((p.ys[i] or 0.0) for p in d.parts) for i in idx]
    ymax = max(totals + [0.0])
    yt, y_name = axis(0.0, ymax or 1.0, d.y_unit, d.base)
    ytop = max(yt[-1][0], ymax) or 1.0
    sy = lambda v: MT + ph - (v / ytop) * ph
    band = pw / max(len(idx), 1)
    bw = max(band * 0.7, 1.0)
    x_name = _pick(max((abs(x) for x in d.bars_x), default=1.0), d.x_unit, d.base)[1]
    for k, i in enumerate(idx):
        x0 = ML + k * band + (band - bw) / 2
        acc = 0.0
        xval = d.bars_x[i]
        label = d.bar_labels[i] if i < len(d.bar_labels) else fmt_value(xval, d.x_unit, d.base)
        hl = d.highlight_x is not None and not d.bar_labels and math.isclose(xval, d.highlight_x, rel_tol=1e-9)
        mark = next((lbl for m, lbl in d.markers if not d.bar_labels and math.isclose(xval, m, rel_tol=1e-9)), None)
        for j, p in enumerate(d.parts):
            v = p.ys[i] or 0.0
            if v <= 0:
                continue
            y1, y0 = sy(acc), sy(acc + v)
            geo["bars"].append({"x": round(x0, 2), "y": round(y0, 2), "w": round(bw, 2), "h": round(max(y1 - y0, 0.5), 2),
                                "cls": f"s{j % 8}", "title": f"{p.name} at {label}: {fmt_value(v, d.y_unit, d.base)}"})
            acc += v
        every = max(1, math.ceil(len(idx) / max(1, int(pw // (max(len(label), 3) * CHAR_W + 8)))))
        if k % every == 0:
            geo["xticks"].append({"pos": round(x0 + bw / 2, 2), "label": label, "hl": hl or mark is not None})
        if len(idx) <= 8 and acc > 0:
            geo["bars"].append({"total": True, "x": round(x0 + bw / 2, 2), "y": round(sy(acc) - 4, 2),
                                "label": fmt_value(acc, d.y_unit, d.base)})
        if hl or mark is not None:
            _marker(geo, x0 + bw / 2, "your request" if hl else mark, hl=hl, bar=True)
    geo["yticks"] = [{"pos": round(sy(t), 2), "label": label} for t, label in yt]
    geo["y_label"] = axis_label(d.y_label, d.y_unit, d.base, y_name)
    geo["x_label"] = axis_label(d.x_label, "" if d.bar_labels else d.x_unit, d.base, x_name)
    geo["legend"] = [{"name": p.name, "cls": f"s{j % 8}", "style": ""} for j, p in enumerate(d.parts)]
    return geo


def table_rows(d: ChartData, limit: int = 60) -> tuple[list[str], list[list[str]]]:
    """The chart's numbers as a small table (for screen readers, print and copying); points of
    candidates that do not fit say so."""
    src = d.parts if d.kind == "stacked-bar" else d.series
    xs = d.bars_x if d.kind == "stacked-bar" else (src[0].xs if src else [])
    head = [d.x_label] + [s.name for s in src]

    def cell(s, i: int) -> str:
        if i >= len(s.ys):
            return "—"
        if s.ys[i] is None:
            return "—"
        text = f"{s.ys[i]:.6g}"
        return text + " (does not fit)" if s.fits and i < len(s.fits) and not s.fits[i] else text

    rows = []
    for i in _thin(len(xs), limit):
        rows.append([d.bar_labels[i] if i < len(d.bar_labels) else f"{xs[i]:.6g}"] + [cell(s, i) for s in src])
    return head, rows


# --------------------------------------------------------------------------- labels that avoid marks

#: advance widths in em, by character class, of the widest font the site's stack meets (DejaVu Sans Bold, which
#: Linux browsers use for system-ui; measured in Chromium): an estimate that a label's real width stays under
_NARROW = set(" '`ijlIJ,.·:;|/\\")
_SEMI = set("ftr()[]!-_*\"?")
_WIDE = set("ABCDGHKNOQRUVX#+<=>^~×≥≤&")
_WIDEST = set("mwMW@%—")


def text_width(text: str, size: float) -> float:
    """An upper estimate of the width of `text` at font size `size` (user units), bold or not."""
    em = 0.0
    for ch in text:
        if ch in _NARROW:
            em += 0.40
        elif ch in _SEMI:
            em += 0.53
        elif ch in _WIDE:
            em += 0.88
        elif ch in _WIDEST:
            em += 1.11
        elif ord(ch) < 0x2E80:
            em += 0.73
        else:                      # CJK and other full-width text
            em += 1.05
    return em * size


def free_box(w: float, h: float, near: tuple[float, float], obstacles: list[tuple[float, float, float]],
             area: tuple[float, float, float, float], preferred: list[tuple[float, float]] = (),
             step: float = 4.0, within: float = math.inf) -> tuple[float, float, bool] | None:
    """The top-left corner of a w × h box inside `area` (x0, y0, x1, y1) that no obstacle reaches (an obstacle
    is a circle (x, y, r), taken as its enclosing square): the first free one of `preferred` (flag True), else
    the free position of a `step` grid nearest to `near` and at most `within` from it (flag False); None when
    there is no such place.

    The obstacles are painted on a 1-unit raster and every box is tested at once on its summed-area table."""
    x0, y0, x1, y1 = area
    if x1 - x0 < w or y1 - y0 < h:
        return None
    cols, rows = int(math.ceil(x1)) + 2, int(math.ceil(y1)) + 2
    occupied = np.zeros((rows, cols), dtype=np.int32)
    for ox, oy, r in obstacles:
        c0, c1 = max(int(math.floor(ox - r)), 0), min(int(math.ceil(ox + r)), cols - 1)
        r0, r1 = max(int(math.floor(oy - r)), 0), min(int(math.ceil(oy + r)), rows - 1)
        if c0 <= c1 and r0 <= r1:
            occupied[r0:r1 + 1, c0:c1 + 1] = 1
    table = np.zeros((rows + 1, cols + 1), dtype=np.int64)
    table[1:, 1:] = occupied.cumsum(axis=0).cumsum(axis=1)

    def free(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        c0, c1 = np.clip(np.floor(xs), 0, cols - 1).astype(int), np.clip(np.ceil(xs + w), 0, cols - 1).astype(int)
        r0, r1 = np.clip(np.floor(ys), 0, rows - 1).astype(int), np.clip(np.ceil(ys + h), 0, rows - 1).astype(int)
        total = table[r1 + 1, c1 + 1] - table[r0, c1 + 1] - table[r1 + 1, c0] + table[r0, c0]
        return (total == 0) & (xs >= x0) & (ys >= y0) & (xs + w <= x1) & (ys + h <= y1)

    if len(preferred):
        px, py = np.array([p[0] for p in preferred], dtype=float), np.array([p[1] for p in preferred], dtype=float)
        ok = free(px, py)
        if ok.any():
            k = int(np.argmax(ok))
            return float(px[k]), float(py[k]), True
    gx, gy = np.meshgrid(np.arange(x0, x1 - w + 1e-9, step), np.arange(y0, y1 - h + 1e-9, step))
    gx, gy = gx.ravel(), gy.ravel()
    ok = free(gx, gy)
    if not ok.any():
        return None
    dx = np.maximum.reduce([gx - near[0], np.zeros_like(gx), near[0] - gx - w])
    dy = np.maximum.reduce([gy - near[1], np.zeros_like(gy), near[1] - gy - h])
    gap = np.where(ok, dx * dx + dy * dy, np.inf)
    k = int(np.argmin(gap))
    if gap[k] > within * within:
        return None
    return float(gx[k]), float(gy[k]), False
