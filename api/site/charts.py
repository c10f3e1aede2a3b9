"""Inline SVG charts of calculator sweeps, drawn from `Calculator.chart` (no JavaScript, no network).

Two steps, kept apart so that the markup stays in a template:
1. `extract(...)` reads a request body and the envelope's outputs along the chart's paths and
   returns a `ChartData` (series of points, or stacked parts per x, and markers);
2. `api.site.chart_layout.layout(...)` turns a `ChartData` into plain geometry (axes, ticks,
   polylines, rectangles) that `api/templates/_chart.html.j2` draws.

`derived_bodies(...)` proposes sweeps around a request that does not sweep, for chart previews.

Paths are dotted; a `*` fans out over a list (`candidates.*.cost_per_success`). The swept field
`Chart.x` is a request field, either top level (`tokens`, `operation.m`) or inside a list of
objects (`prefix_hit_rate` inside every `candidates[i]`); in the second case each object is a series.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calculators.framework.registry import Chart

#: what `get_path` answers for a path that does not resolve
MISSING = object()


# --------------------------------------------------------------------------- data

@dataclass
class Series:
    """One line (or one stacked part): y values over x values."""

    name: str
    xs: list[float]
    ys: list[float | None]
    constant: bool = False          # a scalar output drawn as a level line across the x range
    fits: list[bool] | None = None  # per point: False = the candidate does not fit (drawn hollow, dashed)
    style: str = ""                 # "" | "what-if" (a variant of the request, drawn dotted)


@dataclass
class ChartData:
    """What a chart shows, before any geometry: series or stacked parts, markers, labels."""

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
    y_unit: str = ""                 # "s", "B", "B/s", "USD" …: ticks read 5 ms, 20 GB, $0.02 (see chart_layout.UNITS)
    x_unit: str = ""
    base: str = "decimal"            # bytes: decimal (GB) or binary (GiB); the axis label says which
    x_scale: str = "auto"            # linear | log | auto (chart_layout.use_log_x states the rule)
    limits: list[tuple[float, str]] = field(default_factory=list)   # y levels that bound the result (a budget)

    @property
    def empty(self) -> bool:
        if self.kind == "stacked-bar":
            return not self.bars_x or not self.parts
        return not any(any(y is not None for y in s.ys) for s in self.series)


def _num(v: Any) -> float | None:
    """A finite number as float; None for anything else (bools, NaN, text)."""
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
    """A legend name for a list element: its name/label/id, an `x vs y` pair, or `#n`."""
    if isinstance(el, dict):
        for key in ("name", "label", "id", "format", "kv_format"):
            if isinstance(el.get(key), str) and el[key]:
                return el[key]
        pair = [str(el[k]) for k in ("x", "y") if isinstance(el.get(k), str)]
        if len(pair) == 2:
            return f"{pair[0]} vs {pair[1]}"
    return f"#{index + 1}"


def short_key(path: str) -> str:
    """The last named part of a dotted path (`items.*.cost` -> `cost`)."""
    parts = [p for p in path.split(".") if p != "*" and not p.isdigit()]
    return parts[-1] if parts else path


# --------------------------------------------------------------------------- where x lives

@dataclass
class XField:
    """Where the swept request field lives."""

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
    """Does the request give a list of at least two values for the swept field?"""
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


def _fits_of(value: Any, n: int) -> list[bool] | None:
    """A list of n booleans (a `fits` output), or None."""
    if isinstance(value, list) and len(value) == n and all(isinstance(v, bool) for v in value):
        return list(value)
    return None


def _series_for(path: str, outputs: dict, n: int, aligned_first: bool, fits: str | None = None,
                several: bool = False) -> list[Series]:
    """Series of one y path: one, or one per element for a wildcard path (named by the element, and
    by the key too when the chart has `several` y paths; marked what-if under a `what_if` list)."""
    items = fan_out(outputs, path)
    if not items:
        return []
    has_star = "*" in path.split(".")
    top_fits = _fits_of(get_path(outputs, fits), n) if fits else None
    if not has_star:
        ys = _as_ys(items[0][0], n)
        return [Series(short_key(path), [], ys[0], ys[1], fits=None if ys[1] else top_fits)] if ys else []
    values = [v for v, _ in items]
    if aligned_first and len(values) == n and all(_num(v) is not None or v is None for v in values):
        return [Series(short_key(path), [], [_num(v) for v in values], fits=top_fits)]
    what_if = "what_if" in path.split(".")[0]
    out = []
    for i, (v, el) in enumerate(items):
        ys = _as_ys(v, n)
        if ys:
            name = element_label(el, i)
            if several:
                name = f"{'what-if ' if what_if else ''}{name} · {short_key(path)}"
            el_fits = _fits_of(el.get(short_key(fits)), n) if fits and isinstance(el, dict) else None
            out.append(Series(name, [], ys[0], ys[1], fits=None if ys[1] else el_fits, style="what-if" if what_if else ""))
    return out


def _markers(path: str | None, outputs: dict, label: str = "") -> list[tuple[float, str]]:
    if not path:
        return []
    out = []
    for i, (v, el) in enumerate(fan_out(outputs, path)):
        values = v if isinstance(v, list) and v and len({_num(a) for a in v}) == 1 else [v]
        f = _num(values[0]) if values else None
        if f is not None:
            name = element_label(el, i) if el is not None and "*" in path.split(".") else (label or short_key(path))
            out.append((f, name))
    return out


def _limits(chart: Chart, outputs: dict) -> list[tuple[float, str]]:
    """The chart's limit output as a level: a scalar, or a list whose values are all equal."""
    if not chart.limit:
        return []
    v = get_path(outputs, chart.limit)
    if isinstance(v, list) and v and len({_num(a) for a in v}) == 1:
        v = v[0]
    f = _num(v)
    return [(f, chart.limit_label or short_key(chart.limit))] if f is not None and f > 0 else []


def _dedupe(series: list[Series]) -> list[Series]:
    """Drop a series equal to an earlier one (bytes_total when there is one request): the name says both."""
    out: list[Series] = []
    for s in series:
        twin = next((o for o in out if o.ys == s.ys and o.constant == s.constant), None)
        if twin is None:
            out.append(s)
        else:
            twin.name = f"{twin.name} = {s.name}"
    return out


def extract(chart: Chart, body: dict, outputs: dict, title: str = "", highlight: float | None = None) -> ChartData | None:
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
                     highlight_x=highlight, **_units(chart))
    aligned = xf.parent is None
    several = len(chart.y) > 1
    series: list[Series] = []
    for y in chart.y:
        series.extend(_series_for(y, outputs, n, aligned, chart.fits, several))
    if several and all("*" in y.split(".") for y in chart.y) and not aligned:
        # several wildcard paths fanned out per element: name the series by element and key
        series = []
        for y in chart.y:
            for s in _series_for(y, outputs, n, aligned):
                s.name = f"{s.name} · {short_key(y)}"
                series.append(s)
    series = _dedupe(series)
    for s in series:
        s.xs = xs
    if data.kind == "stacked-bar":
        data.bars_x = xs
        data.parts = series
    else:
        data.series = series
    data.markers = _markers(chart.marker, outputs, chart.marker_label)
    data.limits = _limits(chart, outputs)
    return None if data.empty else data


def extract_variants(chart: Chart, outputs: dict, title: str = "") -> ChartData | None:
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
        units = {**_units(chart), "x_unit": ""}
        d = ChartData("stacked-bar", title, key.replace("_", " "), chart.y_label or "", **units)
        d.bars_x = [float(i) for i in range(len(rows))]
        d.bar_labels = [label for label, _ in rows]
        d.parts = [Series(leaf, d.bars_x, [_num(r.get(leaf)) if isinstance(r, dict) else None for _, r in rows])
                   for leaf in leaves]
        d.parts = [p for p in d.parts if any(y for y in p.ys)]
        return None if d.empty else d
    return None


def unit_of_key(key: str) -> str:
    """The unit a field or output name carries: `…_bytes_per_s` B/s, `…_bytes` B, `…_s` s, `…_usd` USD …"""
    k = short_key(key).lower()
    words = k.split("_")
    if k.endswith("bytes_per_s"):
        return "B/s"
    if k.endswith("bits_per_s"):
        return "bit/s"
    if k.endswith(("flop_per_s", "flops_per_s")):
        return "FLOP/s"
    if "bytes" in words or k == "bytes":
        return "B"
    if "usd" in words:
        return "USD"
    if k.endswith("_s") and not k.endswith(("_per_s", "_tokens_s")):
        return "s"
    return ""


def _units(chart: Chart) -> dict[str, str]:
    """The axes' units (declared, else read from the names) and the chart's scale choices."""
    y_unit = chart.y_unit
    if y_unit is None:
        found = {unit_of_key(y) for y in chart.y}
        y_unit = found.pop() if len(found) == 1 else ""
        if not y_unit and "second" in (chart.y_label or "").lower():
            y_unit = "s"
    x_unit = chart.x_unit if chart.x_unit is not None else unit_of_key(chart.x)
    return {"y_unit": y_unit, "x_unit": x_unit, "base": chart.base, "x_scale": chart.x_scale}


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


FRACTION_POINTS = [i / 20 for i in range(21)]


def _sweep_centre(current: Any, schema: dict | None) -> tuple[float | None, float | None, float | None, bool, bool]:
    """(current value, lower bound, upper bound, integer?, fraction?) of a field a sweep preview varies."""
    lo, hi, integer = _bounds(schema)
    if isinstance(current, list):
        current = current[0] if current else None
    fraction = lo is not None and lo >= 0 and hi is not None and hi <= 1 and not integer
    return _num(current), lo, hi, integer, fraction


def _within(raw: list[float], lo: float | None, hi: float | None, integer: bool) -> list[float] | None:
    """The distinct points of `raw` inside the bounds (ints for an integer field); None under two."""
    out = []
    for r in raw:
        if (lo is not None and r < lo) or (hi is not None and r > hi) or r in out:
            continue
        out.append(int(r) if integer else r)
    return out if len(out) >= 2 else None


def sweep_values(current: Any, schema: dict | None) -> list[float] | None:
    """Points around `current` for a sweep preview: 0..1 for a fraction, ×1/8..×8 otherwise."""
    v, lo, hi, integer, fraction = _sweep_centre(current, schema)
    if fraction:
        return list(FRACTION_POINTS)
    if v is None or v <= 0:
        return None
    raw = [v * 2.0 ** k for k in range(-3, 4)]
    if integer:
        raw = [float(max(1, round(r))) for r in raw]
    return _within(raw, lo, hi, integer)


def linear_sweep_values(current: Any, schema: dict | None, steps: int = 8) -> list[float] | None:
    """Evenly spaced points from current/4 to 2 × current (the current value among them), for a chart
    with a linear x axis: 0..1 for a fraction; None when there is no positive current value."""
    v, lo, hi, integer, fraction = _sweep_centre(current, schema)
    if fraction:
        return list(FRACTION_POINTS)
    if v is None or v <= 0:
        return None
    step = v / 4
    if integer:
        step = max(1.0, float(round(step)))
    raw = [step * k for k in range(1, steps + 1)]
    if integer:
        raw = [float(round(r)) for r in raw]
    if not any(math.isclose(r, v, rel_tol=1e-9) for r in raw):
        raw = sorted(set(raw) | {v})
    return _within(raw, lo, hi, integer)


def derived_bodies(chart: Chart, body: dict, field_schema: dict | None, max_elements: int = 4) -> list[tuple[str, dict, float | None]]:
    """Requests that sweep `chart.x` around a request that does not: (caption, body, current x).
    Points are evenly spaced (a linear axis) unless the chart asks for a log x axis (then ×2 steps)."""
    xf = locate_x(body, chart.x)
    if xf is None or is_sweep(body, xf):
        return []
    points = sweep_values if chart.x_scale == "log" else linear_sweep_values
    out = []
    if xf.parent is None:
        current = get_path(body, xf.path)
        values = points(current, field_schema)
        if values:
            out.append((f"{chart.x} swept around your request", _replace(body, xf.path, values), _num(current)))
        return out
    for i, el in enumerate((body.get(xf.parent) or [])[:max_elements]):
        current = get_path(el, xf.path)
        if current is MISSING:
            current = None
        values = points(current if current is not None else 0.5, field_schema)
        if not values:
            continue
        new = dict(body)
        new[xf.parent] = [(_replace(e, xf.path, values) if j == i else e) for j, e in enumerate(body[xf.parent])]
        label = element_label(el, i)
        out.append((f"{chart.x} of {label} swept, the others as given", new, _num(current)))
    return out


def _replace(node: dict, path: str, value: Any) -> dict:
    """A copy of `node` with the dotted `path` set to `value`."""
    head, _, rest = path.partition(".")
    new = dict(node)
    new[head] = _replace(dict(node.get(head) or {}), rest, value) if rest else value
    return new

