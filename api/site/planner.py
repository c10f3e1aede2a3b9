"""The deployment planner's own section of its calculator page: a Pareto chart of the candidates and
the candidates table, sorted through the URL (no JavaScript).

`api.site.calculators` calls this module for `deployment-plan` only:
1. `read_view(query)` reads the view parameters (`sort`, `desc`, `all`), which change how the result
   is shown, never the request; an unknown column or flag is a 422 problem naming the parameter;
2. `section(name, body, envelope, view)` builds the chart geometry and the table rows that
   `api/templates/_planner.html.j2` draws;
3. `HIDDEN` names the outputs this section shows instead of the generic result table.

Sort links keep the request body in the URL (`urls.calculator_view`), so a sorted table is shareable.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from api.site.chart_layout import compact, free_box, text_width, ticks
from api.site.planner_launch import launch_view
from api.urls import urls
from calculators.framework import fmt_s, num
from calculators.framework import headline as hf

TEMPLATE = "_planner.html.j2"
#: outputs drawn by this section rather than listed in the generic result table
HIDDEN = ("candidates", "pareto", "launch")
#: the view parameters (they must not be request fields of the calculator)
VIEW_PARAMS = ("sort", "desc", "all")
#: rows of the sorted candidates shown besides the best plan and the Pareto set; with `all=1`, at most MAX_ROWS
ROWS = 40
MAX_ROWS = 800
#: marks drawn at most (marks of one kind within a cell of 1, 2, 3 … px merge); tooltips only up to TITLED
MAX_DOTS = 2500
TITLED = 600
ANCHOR = "candidates"


@dataclass(frozen=True)
class Column:
    """A column of the candidates table: the contract's field, its header and how a value reads."""

    key: str
    label: str
    kind: str = "int"          # int | text | s | rate | bytes | bool | flag | usd | mode
    title: str = ""
    #: the value every candidate has unless a search option changes it: the column is shown only when some
    #: candidate differs (DP attention is searched for MoE models, more than one token per step needs `mtp`)
    unless_all: Any = None
    #: what the table note says when the column is left out (every candidate has the usual value)
    usual: str = ""


COLUMNS: tuple[Column, ...] = (
    Column("hardware", "hardware", "text"), Column("mode", "mode", "mode"),
    Column("tp", "TP", title="tensor-parallel degree"), Column("pp", "PP", title="pipeline stages"),
    Column("ep", "EP", title="expert-parallel degree"),
    Column("dp_attention", "DP attn", "flag", "attention data-parallel over the TP ranks, experts over all of them",
           unless_all=False, usual="no candidate uses DP attention"),
    Column("batch", "batch", title="concurrent sequences per replica"),
    Column("replicas", "replicas", title="decode replicas (disaggregated: of the decode pool)"),
    Column("total_devices", "devices", title="all devices of the plan"),
    Column("ttft_s", "TTFT p90", "s", "90th-percentile time to first token"),
    Column("tpot_s", "TPOT", "s", "mean time per output token"),
    Column("tokens_per_step", "tok/step", "rate", "output tokens a sequence gains per decode step (1 + accepted MTP drafts)",
           unless_all=1.0, usual="every candidate gains 1 token per decode step (no MTP)"),
    Column("tokens_per_s_per_device", "tok/s per device", "rate", "output tokens per second per device"),
    Column("tokens_per_s_per_user", "tok/s per user", "rate", "output tokens per second per user (1 / TPOT)"),
    Column("memory_per_device_bytes", "memory per device", "bytes", "weights + KV per device, decimal GB (10⁹ B)"),
    Column("fits", "fits", "bool", "fits in usable device memory"),
    Column("meets_slo", "meets SLO", "bool", "meets both the TTFT and the TPOT SLO"),
    Column("cost_per_hour_usd", "$/h", "usd", "US dollars per hour, all devices"),
    Column("cost_per_mtok_usd", "$/Mtok", "usd", "US dollars per million output tokens"),
    Column("reason", "reason", "text", "why a candidate does not qualify"),
)
BY_KEY = {c.key: c for c in COLUMNS}


@dataclass(frozen=True)
class View:
    """How the table is shown: sort column (None: the planner's ranking), direction, all rows."""

    sort: str | None = None
    desc: bool = False
    all: bool = False

    def params(self, **changes: Any) -> dict[str, Any]:
        v = {"sort": self.sort, "desc": 1 if self.desc else None, "all": 1 if self.all else None}
        v.update(changes)
        return v


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def read_view(query: Any) -> tuple[View, dict | None]:
    """The view parameters of a query string, and a 422 problem naming the ones that are wrong."""
    errors = []
    sort = (query.get("sort") or "").strip() or None
    if sort is not None and sort not in BY_KEY:
        errors.append({"field": "sort", "in": "query",
                       "message": f"unknown column {sort!r}; sortable columns: {', '.join(BY_KEY)}"})
        sort = None
    flags = {}
    for name in ("desc", "all"):
        raw = (query.get(name) or "").strip().lower()
        if raw not in _TRUE + _FALSE:
            errors.append({"field": name, "in": "query", "message": f"{raw!r} is not a flag (use 1 or 0)"})
        flags[name] = raw in _TRUE
    problem = None
    if errors:
        problem = {"title": "Invalid request", "status": 422,
                   "detail": "invalid field(s): " + ", ".join(e["field"] for e in errors), "errors": errors}
    return View(sort, flags["desc"], flags["all"]), problem


# --------------------------------------------------------------------------- ordering

def plan_key(c: dict) -> tuple:
    """What identifies a configuration (the best plan and the Pareto set are copies of candidates)."""
    return (c.get("hardware"), c.get("mode"), c.get("tp"), c.get("pp"), c.get("ep"), bool(c.get("dp_attention")),
            c.get("batch"))


def _value(c: dict, key: str) -> Any:
    v = c.get(key)
    if key == "memory_per_device_bytes" and isinstance(v, dict):
        return v.get("total")
    return v


def _sortable(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, str):
        return v.casefold()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _ranking(c: dict) -> tuple:
    """The planner's own order: meeting the SLOs first, then cheapest per output token, fewest devices."""
    cost = c.get("cost_per_mtok_usd")
    return (not c.get("meets_slo"), cost is None, cost or 0.0, c.get("total_devices") or math.inf, c.get("tp") or 0)


def order(cands: list[dict], view: View) -> list[int]:
    """Candidate indices in the view's order; empty values last in either direction, ties as computed."""
    if view.sort is None:
        return sorted(range(len(cands)), key=lambda i: _ranking(cands[i]))
    vals = [_sortable(_value(c, view.sort)) for c in cands]
    present = [i for i, v in enumerate(vals) if v is not None]
    present.sort(key=lambda i: vals[i], reverse=view.desc)   # stable either way: ties keep the computed order
    return present + [i for i, v in enumerate(vals) if v is None]


# --------------------------------------------------------------------------- table

def _cell(col: Column, c: dict, i: int) -> dict[str, Any]:
    v = c.get(col.key)
    path = f"{ANCHOR}.{i}.{col.key}"
    if col.kind == "bytes" and isinstance(v, dict):
        total = v.get("total")
        title = (f"weights {num(v.get('weights', 0) / 1e9, 4)} GB + KV {num(v.get('kv', 0) / 1e9, 4)} GB"
                 if total is not None else "")
        return {"text": "—" if total is None else f"{num(total / 1e9, 4)} GB", "raw": total, "path": path + ".total",
                "title": title, "cls": "num"}
    if v is None:
        return {"text": "—", "raw": None, "path": path, "title": "", "cls": "num" if col.kind != "text" else ""}
    if col.kind == "bool":
        return {"text": "yes" if v else "no", "raw": v, "path": path, "title": "", "cls": "yes" if v else "no"}
    if col.kind == "flag":              # a choice, not a verdict: no pass/fail colour
        return {"text": "yes" if v else "no", "raw": v, "path": path, "title": "", "cls": ""}
    if col.kind == "s":
        text = hf.fmt_seconds(v, 4)     # 4 figures (45.5 ms, 1.741 s): the exact value is the cell's data-value
    elif col.kind == "rate":
        text = num(v, 4)
    elif col.kind == "usd":
        text = _usd(v)
    elif col.kind == "mode":
        ratio = c.get("ratio")
        return {"text": Markup("{}<br><small>{}</small>").format(v, ratio) if ratio else v, "raw": v, "path": path,
                "title": "", "cls": "mode"}
    elif col.kind == "text":
        return {"text": v, "raw": v, "path": path, "title": "", "cls": "reason" if col.key == "reason" else ""}
    else:
        text = num(v)
    return {"text": text, "raw": v, "path": path, "title": "", "cls": "num"}


def _usd(v: float) -> str:
    """Dollars with a steady number of decimals ($1.944, $36.00, $1,234), small amounts to 3 figures."""
    if abs(v) >= 1000:
        return f"${v:,.0f}"
    if abs(v) >= 10:
        return f"${v:,.2f}"
    if abs(v) >= 0.01:
        return f"${v:.3f}"
    return f"${v:.3g}"


def columns(cands: list[dict], view: View | None = None) -> tuple[Column, ...]:
    """The columns shown: every column, but one that only a search option fills (`unless_all`) only when some
    candidate differs from its usual value, or the table is sorted by it."""
    def differs(col: Column) -> bool:
        return any((c.get(col.key) if c.get(col.key) is not None else col.unless_all) != col.unless_all for c in cands)
    return tuple(col for col in COLUMNS
                 if col.unless_all is None or differs(col) or (view is not None and view.sort == col.key))


def table(name: str, body: dict, cands: list[dict], view: View, best: int | None, pareto: set[int]) -> dict[str, Any]:
    """Header links and the rows shown: the best plan, the Pareto set and the first rows of the sorted rest."""
    ranked = order(cands, view)
    shown_cols = columns(cands, view)
    limit = MAX_ROWS if view.all else ROWS
    shown = set(ranked[:limit]) | pareto | ({best} if best is not None else set())
    rows: list[dict[str, Any]] = []
    last = -1
    for pos, i in enumerate(ranked):
        if i not in shown:
            continue
        if pos - last > 1:
            rows.append({"gap": pos - last - 1})
        last = pos
        c = cands[i]
        rows.append({"index": i, "rank": pos + 1, "best": i == best, "pareto": i in pareto, "meets": bool(c.get("meets_slo")),
                     "cells": [_cell(col, c, i) for col in shown_cols]})
    if len(ranked) - 1 > last:
        rows.append({"gap": len(ranked) - 1 - last})
    heads = []
    for col in shown_cols:
        active = view.sort == col.key
        heads.append({"key": col.key, "label": col.label, "title": col.title, "active": active,
                      "aria": ("descending" if view.desc else "ascending") if active else None,
                      "url": urls.calculator_view(name, body, fragment=ANCHOR,
                                                  **view.params(sort=col.key, desc=1 if active and not view.desc else None))})
    hidden = len(cands) - sum(1 for r in rows if "index" in r)
    usual = [col.usual for col in COLUMNS if col not in shown_cols]
    folded = (usual[0][:1].upper() + "; ".join(usual)[1:] + (": that column is" if len(usual) == 1 else ": those columns are")
              + " left out.") if usual else ""
    return {"heads": heads, "rows": rows, "total": len(cands), "hidden": hidden, "view": view, "folded": folded,
            "ranking_url": urls.calculator_view(name, body, fragment=ANCHOR, **view.params(sort=None, desc=None)),
            "all_url": urls.calculator_view(name, body, fragment=ANCHOR, **view.params(all=1)) if hidden and not view.all else None,
            "fewer_url": urls.calculator_view(name, body, fragment=ANCHOR, **view.params(all=None)) if view.all else None,
            "capped": view.all and len(cands) > MAX_ROWS, "limit": limit}


# --------------------------------------------------------------------------- chart

W, H = 720, 400
ML, MR, MT, MB = 70, 20, 26, 50
#: every mark's centre stays at least this far inside the frame (user units), the best plan's star included
PAD = 13.0
#: drawn sizes (user units, as the template draws them): a dot's radius, half a square's side, the star's radius
DOT_R, HALF_SQUARE, STAR_R = 3.2, 3.0, 9.0
#: the best plan's label (site.css .best-label: 11.5 px bold): line height and padding inside its box
LABEL_SIZE, LABEL_LINE, LABEL_PAD = 11.5, 14.0, 5.0
#: the SLO band's label (site.css .slo-label), in the margin above the plot
SLO_SIZE = 11.0
#: farthest a label drawn in the plot may sit from its star (user units); farther, it goes under the chart
LEADER_MAX = 60.0


def _scale(lo: float, hi: float, start_at_zero: bool) -> dict[str, Any]:
    """A linear axis from 0 (or lo), or a log axis when the values span more than a factor of 20."""
    if lo > 0 and hi / lo > 20:
        a, b = math.log10(lo / 1.15), math.log10(hi * 1.15)
        cands = [m * 10.0 ** e for e in range(math.floor(a), math.ceil(b) + 1) for m in (1, 2, 5)]
        tv = [t for t in cands if a <= math.log10(t) <= b]
        if len(tv) > 9:
            tv = [t for t in tv if round(t / 10 ** math.floor(math.log10(t))) == 1]
        return {"log": True, "a": a, "b": b, "ticks": tv, "f": math.log10}
    lo0 = 0.0 if start_at_zero else lo
    tv = ticks(lo0, hi * 1.05 if hi > 0 else 1.0, 7)
    b = max(tv[-1], hi) if tv else hi or 1.0
    a = min(tv[0], lo0) if tv else lo0
    return {"log": False, "a": a, "b": b if b > a else a + 1.0, "ticks": tv, "f": lambda v: v}


def _pad(scale: dict[str, Any], values: list[float], length: float) -> None:
    """Widen an axis's domain so that every value lands at least PAD user units inside the frame (of `length`
    units): a mark at the largest or smallest value is drawn inside the plot, never on its edge."""
    f = scale["f"]
    lo, hi = min(f(v) for v in values), max(f(v) for v in values)
    a, b = scale["a"], scale["b"]
    k = PAD / length * 1.02
    for _ in range(60):
        d = (b - a) * k
        na, nb = min(a, lo - d), max(b, hi + d)
        if na == a and nb == b:
            break
        a, b = na, nb
    scale["a"], scale["b"] = a, b


def _label(c: dict) -> str:
    bits = [f"{c.get('total_devices') or '?'} × {c['hardware']}", c["mode"], *_split_bits(c)]
    return ", ".join(bits)


def _split_bits(c: dict) -> list[str]:
    bits = [f"TP {c['tp']}"]
    if (c.get("pp") or 1) > 1:
        bits.append(f"PP {c['pp']}")
    if (c.get("ep") or 1) > 1:
        bits.append(f"EP {c['ep']}")
    if c.get("dp_attention"):
        bits.append("DP attention")
    tps = c.get("tokens_per_step")
    if tps is not None and tps != 1:            # before the batch: "batch 1,024, 1.85 …" would run two numbers together
        bits.append(f"{num(tps, 3)} tok/step")
    bits.append(f"batch {c['batch']}")
    return bits


def _frontier_samples(fpts: list[tuple[float, float]], every: float = 3.0) -> list[tuple[float, float, float]]:
    """Points along the frontier path, as thin obstacles for the label."""
    out = []
    for (x0, y0), (x1, y1) in zip(fpts, fpts[1:]):
        n = max(1, int(math.hypot(x1 - x0, y1 - y0) // every))
        out.extend((x0 + (x1 - x0) * t / n, y0 + (y1 - y0) * t / n, 1.5) for t in range(n + 1))
    return out


def _best_label(c: dict, bx: float, by: float, dots: list[dict], fpts: list[tuple[float, float]],
                right: float, bottom: float) -> dict[str, Any]:
    """The best plan's star and its label in two lines, placed where no mark is: beside the star if there is
    room, else at a free place nearby (a leader line to the star), else under the chart, keyed by a small star."""
    cost = f" · ${num(c['cost_per_mtok_usd'], 4)}/Mtok" if c.get("cost_per_mtok_usd") is not None else ""
    lines = [f"best: {c.get('total_devices') or '?'} × {c['hardware']}, {c['mode']}", ", ".join(_split_bits(c)) + cost]
    w = round(max(text_width(t, LABEL_SIZE) for t in lines) + 2 * LABEL_PAD, 1)
    h = round(LABEL_LINE * len(lines) + 6)
    marks = [(d["x"], d["y"], (HALF_SQUARE * 1.42 if d["square"] else DOT_R) + 1.6) for d in dots] + [(bx, by, STAR_R + 1.6)]
    g, r = 6.0, STAR_R + 6.0
    beside = [(bx + r, by - h / 2), (bx - r - w, by - h / 2), (bx + g, by + g), (bx + g, by - g - h),
              (bx - g - w, by + g), (bx - g - w, by - g - h), (bx - w / 2, by + r), (bx - w / 2, by - r - h)]
    area = (ML + 2.0, MT + 2.0, right - 2.0, bottom - 2.0)
    spot = (free_box(w, h, (bx, by), marks + _frontier_samples(fpts), area, beside, within=LEADER_MAX)
            or free_box(w, h, (bx, by), marks, area, beside, within=LEADER_MAX))
    out: dict[str, Any] = {"x": bx, "y": by, "star": _star(bx, by, STAR_R), "leader": None, "icon": None,
                           "label": "best: " + _label(c) + cost, "below": spot is None}
    if spot is None:                    # the plot is full: the label goes under the chart, keyed by a small star
        w += 16
        x, y = float(ML), float(H + 2)
        out["icon"] = _star(x + LABEL_PAD + 5, y + h / 2, 6.0)
        tx = x + LABEL_PAD + 16
    else:
        x, y, near = spot
        tx = x + LABEL_PAD
        if not near:                    # a thin line from the star to the nearest point of the box
            nx, ny = min(max(bx, x), x + w), min(max(by, y), y + h)
            d = math.hypot(nx - bx, ny - by) or 1.0
            out["leader"] = {"x1": round(bx + (nx - bx) * STAR_R / d, 1), "y1": round(by + (ny - by) * STAR_R / d, 1),
                             "x2": round(nx, 1), "y2": round(ny, 1)}
    out["box"] = {"x": round(x, 1), "y": round(y, 1), "w": round(w, 1), "h": h}
    out["lines"] = [{"x": round(tx, 1), "y": round(y + LABEL_LINE * (k + 1), 1), "text": t} for k, t in enumerate(lines)]
    return out


def chart(cands: list[dict], tpot_slo: float | None, best: int | None, pareto: list[int]) -> dict[str, Any] | None:
    """Geometry of the Pareto chart: tokens/s per user (x) against tokens/s per device (y), every fitting
    candidate as a dot, the frontier as one path, the best plan marked, the TPOT SLO region shaded.
    Every mark lies inside the frame (`_pad`) and the best plan's label covers none (`_best_label`)."""
    pts = [(i, c["tokens_per_s_per_user"], c["tokens_per_s_per_device"]) for i, c in enumerate(cands)
           if c.get("fits") and (c.get("tokens_per_s_per_user") or 0) > 0 and (c.get("tokens_per_s_per_device") or 0) > 0]
    if not pts:
        return None
    slo_x = 1.0 / tpot_slo if tpot_slo else None
    xs = [x for _, x, _ in pts] + ([slo_x] if slo_x else [])
    ys = [y for _, _, y in pts]
    pw, ph = W - ML - MR, H - MT - MB
    sx_, sy_ = _scale(min(xs), max(xs), True), _scale(min(ys), max(ys), True)
    _pad(sx_, xs, pw)
    _pad(sy_, ys, ph)

    def sx(v: float) -> float:
        return round(ML + (sx_["f"](v) - sx_["a"]) / (sx_["b"] - sx_["a"]) * pw, 1)

    def sy(v: float) -> float:
        return round(MT + ph - (sy_["f"](v) - sy_["a"]) / (sy_["b"] - sy_["a"]) * ph, 1)

    hw_order = list(dict.fromkeys(c["hardware"] for c in cands))
    cls_of = {h: f"s{k % 8}" for k, h in enumerate(hw_order)}
    front = set(pareto)
    pts.sort(key=lambda p: p[0] not in front)   # the frontier's marks first: never merged away
    for cell in (1, 2, 3, 4, 6, 8, 12, 16):      # marks of one kind in one cell merge; coarser cells until few enough
        kept, seen = [], set()
        for i, x, y in pts:
            c = cands[i]
            key = (round(sx(x) / cell), round(sy(y) / cell), c["hardware"], c["mode"], bool(c.get("meets_slo")))
            if key not in seen or i in front:
                seen.add(key)
                kept.append((i, x, y))
        if len(kept) <= MAX_DOTS:
            break
    dots = []
    for i, x, y in kept:
        c = cands[i]
        px, py = sx(x), sy(y)
        dots.append({"x": px, "y": py, "cls": cls_of[c["hardware"]], "square": c["mode"] == "disaggregated",
                     "miss": not c.get("meets_slo"), "i": i,
                     "title": f"{_label(c)}: {num(x, 4)} tok/s/user, {num(y, 4)} tok/s/device"
                              + (f", ${num(c['cost_per_mtok_usd'], 4)}/Mtok" if c.get("cost_per_mtok_usd") is not None else "")})
    titled = len(dots) <= TITLED
    for d in dots:
        if not titled and d["i"] not in front:
            d["title"] = ""
    fpts = sorted((sx(cands[i]["tokens_per_s_per_user"]), sy(cands[i]["tokens_per_s_per_device"])) for i in pareto
                   if (cands[i].get("tokens_per_s_per_user") or 0) > 0 and (cands[i].get("tokens_per_s_per_device") or 0) > 0)
    frontier = ("M" + " L".join(f"{x},{y}" for x, y in fpts)) if fpts else ""
    geo: dict[str, Any] = {
        "width": W, "height": H, "xlabel_y": H - 8, "left": ML, "right": ML + pw, "top": MT, "bottom": MT + ph,
        "x_label": "output tokens/s per user (1 / TPOT)" + (" — log scale" if sx_["log"] else ""),
        "y_label": "output tokens/s per device" + (" — log scale" if sy_["log"] else ""),
        "x_log": sx_["log"], "y_log": sy_["log"],
        "xticks": [{"pos": sx(t), "label": compact(t)} for t in sx_["ticks"] if sx_["a"] <= sx_["f"](t) <= sx_["b"]],
        "yticks": [{"pos": sy(t), "label": compact(t)} for t in sy_["ticks"] if sy_["a"] <= sy_["f"](t) <= sy_["b"]],
        "dots": dots, "frontier": frontier, "frontier_n": len(fpts), "band": None, "best": None,
        "legend": [{"name": h, "cls": cls_of[h]} for h in hw_order],
        "drawn": len(dots), "points": len(pts), "titled": titled, "cell": cell,
    }
    if slo_x:
        bx = max(sx(slo_x), ML)
        label = f"TPOT SLO met: ≥ {num(slo_x, 4)} tok/s/user (TPOT ≤ {fmt_s(tpot_slo)})"
        tw = text_width(label, SLO_SIZE)
        if bx + 6 + tw <= W - 4:              # in the margin above the plot, reading away from the line
            tx, anchor = bx + 6, "start"
        elif bx - 6 - tw >= 4:
            tx, anchor = bx - 6, "end"
        else:
            tx, anchor = max(4.0, W - 4 - tw), "start"
        geo["band"] = {"x": bx, "w": round(ML + pw - bx, 1), "tx": round(tx, 1), "anchor": anchor, "ty": MT - 8,
                       "label": label}
    if best is not None and any(d["i"] == best for d in dots):
        c = cands[best]
        geo["best"] = _best_label(c, sx(c["tokens_per_s_per_user"]), sy(c["tokens_per_s_per_device"]), dots, fpts,
                                  ML + pw, MT + ph)
        if geo["best"]["below"]:
            geo["height"] = H + round(geo["best"]["box"]["h"]) + 6
    return geo


def _star(x: float, y: float, r: float) -> str:
    """Points of a five-pointed star centred on (x, y)."""
    pts = []
    for k in range(10):
        rad = r if k % 2 == 0 else r * 0.45
        ang = math.pi / 2 + k * math.pi / 5
        pts.append(f"{round(x + rad * math.cos(ang), 1)},{round(y - rad * math.sin(ang), 1)}")
    return " ".join(pts)


# --------------------------------------------------------------------------- the section

def section(name: str, body: dict, envelope: dict, view: View) -> dict[str, Any]:
    """Everything `_planner.html.j2` draws for one computed plan."""
    out = envelope["outputs"]
    cands: list[dict] = out.get("candidates") or []
    index = {plan_key(c): i for i, c in enumerate(cands)}
    best = index.get(plan_key(out["best"])) if out.get("best") else None
    pareto = [index[k] for k in (plan_key(p) for p in out.get("pareto") or []) if k in index]
    inputs = envelope.get("inputs") or {}
    sources = {}
    for c in cands:
        sources.setdefault(c["hardware"], {"step": c.get("step_source"), "price": c.get("price_source"), "link": c.get("link")})
    return {"template": TEMPLATE, "headline": out.get("headline"), "why": out.get("why"), "best": out.get("best"),
            "evaluated": out.get("configurations_evaluated", len(cands)), "meeting": out.get("meeting_slo"),
            "pareto_n": len(pareto), "chart": chart(cands, inputs.get("tpot_s"), best, pareto),
            "ttft_slo": inputs.get("ttft_s"), "tpot_slo": inputs.get("tpot_s"),
            "table": table(name, body, cands, view, best, set(pareto)), "sources": sources, "anchor": ANCHOR,
            "launch": launch_view(out.get("launch") or (out.get("best") or {}).get("launch"))}


def visible_outputs(outputs: dict) -> dict:
    """The outputs the generic result table still lists (the candidates are this section's table, and the best plan's
    launch configuration its launch block)."""
    out = {k: v for k, v in outputs.items() if k not in HIDDEN}
    if isinstance(out.get("best"), dict) and "launch" in out["best"]:
        out["best"] = {k: v for k, v in out["best"].items() if k != "launch"}
    return out
