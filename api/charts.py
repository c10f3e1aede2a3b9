"""Inline SVG charts of calculator sweeps, drawn from `Calculator.chart` (no JavaScript, no network).

Two steps, kept apart so that the markup stays in a template:
1. `extract(...)` reads a request body and the envelope's outputs along the chart's paths and
   returns a `ChartData` (series of points, or stacked parts per x, and markers);
2. `layout(...)` turns a `ChartData` into plain geometry (axes, ticks, polylines, rectangles) that
   `templates/_chart.html.j2` draws.

Paths are dotted; a `*` fans out over a list (`candidates.*.cost_per_success`). The swept field
`Chart.x` is a request field, either top level (`tokens`, `operation.m`) or inside a list of
objects (`cache_hit_rate` inside every `candidates[i]`); in the second case each object is a series.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

#: most points drawn per line and bars per chart (longer sweeps are thinned evenly for drawing)
MAX_POINTS = 400
MAX_BARS = 40
MISSING = object()


# --------------------------------------------------------------------------- data

@dataclass
class Series:
    name: str
    xs: list[float]
    ys: list[float | None]
    constant: bool = False          # a scalar output drawn as a level line across the x range


@dataclass
class ChartData:
    kind: str                        # line | stacked-bar
    title: str
    x_label: str
    y_label: str
    series: list[Series] = field(default_factory=list)        # line
    bars_x: list[float] = field(default_factory=list)         # stacked-bar: one bar per x
    bar_labels: list[str] = field(default_factory=list)       # stacked-bar: categorical labels instead of x values
    parts: list[Series] = field(default_factory=list)         # stacked-bar: ys aligned with bars_x
    markers: list[tuple[float, str]] = field(default_factory=list)
    highlight_x: float | None = None
    note: str = ""
    y_unit: str = ""                 # "s" when the y axis is seconds (ticks read 5 ms, 40 µs)

    @property
    def empty(self) -> bool:
        if self.kind == "stacked-bar":
            return not self.bars_x or not self.parts
        return not any(any(y is not None for y in s.ys) for s in self.series)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        f = float(v)
        return f if math.isfinite(f) else None
    return None


def get_path(node: Any, path: str) -> Any:
    """Follow a dotted path (list indices allowed); MISSING when it does not resolve."""
    for part in path.split("."):
        if isinstance(node, dict):
            if part not in node:
                return MISSING
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return MISSING
    return node


def fan_out(node: Any, path: str) -> list[tuple[Any, dict | None]]:
    """Resolve a path with `*` wildcards: a list of (value, element the last `*` stood for)."""
    if "*" not in path.split("."):
        v = get_path(node, path)
        return [] if v is MISSING else [(v, None)]
    head, _, tail = path.partition(".*")
    tail = tail.lstrip(".")
    base = get_path(node, head) if head else node
    if not isinstance(base, list):
        return []
    out: list[tuple[Any, dict | None]] = []
    for el in base:
        if not tail:
            out.append((el, el if isinstance(el, dict) else None))
            continue
        for v, inner in fan_out(el, tail):
            out.append((v, inner if inner is not None else (el if isinstance(el, dict) else None)))
    return out


def element_label(el: dict | None, index: int) -> str:
    if isinstance(el, dict):
        for key in ("name", "label", "id", "format", "kv_format"):
            if isinstance(el.get(key), str) and el[key]:
                return el[key]
        pair = [str(el[k]) for k in ("x", "y") if isinstance(el.get(k), str)]
        if len(pair) == 2:
            return f"{pair[0]} vs {pair[1]}"
    return f"#{index + 1}"


def short_key(path: str) -> str:
    parts = [p for p in path.split(".") if p != "*" and not p.isdigit()]
    return parts[-1] if parts else path


# --------------------------------------------------------------------------- where x lives

@dataclass
class XField:
    path: str                   # the request field swept
    parent: str | None = None   # list of objects holding it (fan-out), e.g. "candidates"


def locate_x(body: dict, x: str) -> XField | None:
    """Where the swept field is in a request body (top level first, then inside lists of objects)."""
    if get_path(body, x) is not MISSING:
        return XField(x)
    for key, value in body.items():
        if (isinstance(value, list) and value and all(isinstance(e, dict) for e in value)
                and any(get_path(e, x) is not MISSING for e in value)):
            return XField(x, key)
    return None


def is_sweep(body: dict, xf: XField) -> bool:
    if xf.parent is None:
        v = get_path(body, xf.path)
        return isinstance(v, list) and len(v) >= 2
    return any(isinstance(get_path(e, xf.path), list) and len(get_path(e, xf.path)) >= 2
               for e in body.get(xf.parent) or [])


def sweep_xs(body: dict, xf: XField) -> list[float] | None:
    """The x values of a sweep (the first swept object's, for a fan-out field)."""
    if xf.parent is None:
        v = get_path(body, xf.path)
        return [float(a) if _num(a) is not None else math.nan for a in v] if isinstance(v, list) else None
    for e in body.get(xf.parent) or []:
        v = get_path(e, xf.path)
        if isinstance(v, list) and len(v) >= 2:
            return [float(a) if _num(a) is not None else math.nan for a in v]
    return None


# --------------------------------------------------------------------------- extraction

def _as_ys(value: Any, n: int) -> tuple[list[float | None], bool] | None:
    """A y value as n points: a list of length n, or a scalar repeated (constant)."""
    if isinstance(value, list):
        if len(value) != n or not all(_num(v) is not None or v is None for v in value):
            return None
        return [_num(v) for v in value], False
    f = _num(value)
    if f is None:
        return None
    return [f] * n, True


def _series_for(path: str, outputs: dict, n: int, aligned_first: bool) -> list[Series]:
    """Series of one y path: one, or one per element for a wildcard path."""
    items = fan_out(outputs, path)
    if not items:
        return []
    has_star = "*" in path.split(".")
    if not has_star:
        ys = _as_ys(items[0][0], n)
        return [Series(short_key(path), [], ys[0], ys[1])] if ys else []
    values = [v for v, _ in items]
    if aligned_first and len(values) == n and all(_num(v) is not None or v is None for v in values):
        return [Series(short_key(path), [], [_num(v) for v in values])]
    out = []
    for i, (v, el) in enumerate(items):
        ys = _as_ys(v, n)
        if ys:
            out.append(Series(element_label(el, i), [], ys[0], ys[1]))
    return out


def _markers(path: str | None, outputs: dict) -> list[tuple[float, str]]:
    if not path:
        return []
    out = []
    for i, (v, el) in enumerate(fan_out(outputs, path)):
        values = v if isinstance(v, list) and v and len({_num(a) for a in v}) == 1 else [v]
        f = _num(values[0]) if values else None
        if f is not None:
            label = element_label(el, i) if el is not None else short_key(path)
            out.append((f, label))
    return out


def extract(chart, body: dict, outputs: dict, title: str = "", highlight: float | None = None) -> ChartData | None:
    """Chart data for a swept request (None when the request does not sweep `chart.x`)."""
    xf = locate_x(body, chart.x)
    if xf is None or not is_sweep(body, xf):
        return None
    xs = sweep_xs(body, xf)
    if not xs:
        return None
    n = len(xs)
    x_label = chart.x_label or chart.x
    y_label = chart.y_label or ", ".join(short_key(y) for y in chart.y)
    data = ChartData(chart.kind if chart.kind in ("line", "stacked-bar") else "line", title, x_label, y_label,
                     highlight_x=highlight, y_unit=_unit_of(chart))
    aligned = xf.parent is None
    series: list[Series] = []
    for y in chart.y:
        series.extend(_series_for(y, outputs, n, aligned))
    if len(chart.y) > 1 and all("*" in y.split(".") for y in chart.y) and not aligned:
        # several wildcard paths fanned out per element: name the series by element and key
        series = []
        for y in chart.y:
            for s in _series_for(y, outputs, n, aligned):
                s.name = f"{s.name} · {short_key(y)}"
                series.append(s)
    for s in series:
        s.xs = xs
    if data.kind == "stacked-bar":
        data.bars_x = xs
        data.parts = series
    else:
        data.series = series
    data.markers = _markers(chart.marker, outputs)
    return None if data.empty else data


def extract_variants(chart, outputs: dict, title: str = "") -> ChartData | None:
    """Stacked bars of the request against its variants, for a stacked-bar chart whose parts share a
    parent (`breakdown.upload`, `breakdown.rtt` …) that list elements of the outputs also carry
    (`what_if[i].breakdown`): the budget of each variant side by side."""
    if chart.kind != "stacked-bar" or not chart.y:
        return None
    parents = {y.rsplit(".", 1)[0] for y in chart.y if "." in y and "*" not in y}
    if len(parents) != 1 or len(chart.y) != sum(1 for y in chart.y if "." in y):
        return None
    parent = parents.pop()
    leaves = [y.rsplit(".", 1)[1] for y in chart.y]
    base = get_path(outputs, parent)
    if not isinstance(base, dict) or not all(_num(base.get(k)) is not None for k in leaves if k in base):
        return None
    for key, value in outputs.items():
        if not (isinstance(value, list) and value and all(isinstance(e, dict) for e in value)):
            continue
        if not all(isinstance(get_path(e, parent), dict) for e in value):
            continue
        rows = [("your request", base)] + [(element_label(e, i), get_path(e, parent)) for i, e in enumerate(value)]
        d = ChartData("stacked-bar", title, key.replace("_", " "), chart.y_label or "", y_unit=_unit_of(chart))
        d.bars_x = [float(i) for i in range(len(rows))]
        d.bar_labels = [label for label, _ in rows]
        d.parts = [Series(leaf, d.bars_x, [_num(r.get(leaf)) if isinstance(r, dict) else None for _, r in rows])
                   for leaf in leaves]
        d.parts = [p for p in d.parts if any(y for y in p.ys)]
        return None if d.empty else d
    return None


def _unit_of(chart) -> str:
    label = (chart.y_label or "").lower()
    if "second" in label or all(short_key(y).endswith("_s") for y in chart.y):
        return "s"
    return ""


# --------------------------------------------------------------------------- derived sweeps

def _bounds(schema: dict | None) -> tuple[float | None, float | None, bool]:
    """(minimum, maximum, integer) of a scalar-or-list field schema."""
    lo = hi = None
    integer = False
    stack = [schema or {}]
    while stack:
        s = stack.pop()
        stack.extend(s.get("anyOf") or [])
        if isinstance(s.get("items"), dict):
            stack.append(s["items"])
        if s.get("type") == "integer":
            integer = True
        for k in ("minimum", "exclusiveMinimum"):
            if isinstance(s.get(k), (int, float)):
                lo = s[k] if lo is None else max(lo, s[k])
        for k in ("maximum", "exclusiveMaximum"):
            if isinstance(s.get(k), (int, float)):
                hi = s[k] if hi is None else min(hi, s[k])
    return lo, hi, integer


def sweep_values(current: Any, schema: dict | None) -> list[float] | None:
    """Points around `current` for a sweep preview: 0..1 for a fraction, ×1/8..×8 otherwise."""
    lo, hi, integer = _bounds(schema)
    if isinstance(current, list):
        current = current[0] if current else None
    v = _num(current)
    if lo is not None and lo >= 0 and hi is not None and hi <= 1 and not integer:
        return [i / 20 for i in range(21)]
    if v is None or v <= 0:
        return None
    raw = [v * 2.0 ** k for k in range(-3, 4)]
    if integer:
        raw = [float(max(1, round(r))) for r in raw]
    out = []
    for r in raw:
        if lo is not None and r < lo:
            continue
        if hi is not None and r > hi:
            continue
        if r not in out:
            out.append(int(r) if integer else r)
    return out if len(out) >= 2 else None


def derived_bodies(chart, body: dict, field_schema: dict | None, max_elements: int = 4) -> list[tuple[str, dict, float | None]]:
    """Requests that sweep `chart.x` around a request that does not: (caption, body, current x)."""
    xf = locate_x(body, chart.x)
    if xf is None or is_sweep(body, xf):
        return []
    out = []
    if xf.parent is None:
        current = get_path(body, xf.path)
        values = sweep_values(current, field_schema)
        if values:
            out.append((f"{chart.x} swept around your request", _replace(body, xf.path, values), _num(current)))
        return out
    for i, el in enumerate((body.get(xf.parent) or [])[:max_elements]):
        current = get_path(el, xf.path)
        if current is MISSING:
            current = None
        values = sweep_values(current if current is not None else 0.5, field_schema)
        if not values:
            continue
        new = dict(body)
        new[xf.parent] = [(_replace(e, xf.path, values) if j == i else e) for j, e in enumerate(body[xf.parent])]
        label = element_label(el, i)
        out.append((f"{chart.x} of {label} swept, the others as given", new, _num(current)))
    return out


def _replace(node: dict, path: str, value: Any) -> dict:
    head, _, rest = path.partition(".")
    new = dict(node)
    new[head] = _replace(dict(node.get(head) or {}), rest, value) if rest else value
    return new


# --------------------------------------------------------------------------- layout

W, H = 640, 300
ML, MR, MT, MB = 64, 16, 14, 46


def _nice(span: float) -> float:
    if span <= 0 or not math.isfinite(span):
        return 1.0
    exp = math.floor(math.log10(span))
    f = span / 10 ** exp
    step = 1 if f <= 1 else 2 if f <= 2 else 5 if f <= 5 else 10
    return step * 10 ** exp


def ticks(lo: float, hi: float, count: int = 5) -> list[float]:
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
