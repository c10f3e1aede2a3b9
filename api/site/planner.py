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

from api.site.chart_layout import compact, ticks
from api.urls import urls
from calculators.framework import fmt_s, num

TEMPLATE = "_planner.html.j2"
#: outputs drawn by this section rather than listed in the generic result table
HIDDEN = ("candidates", "pareto")
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
    kind: str = "int"          # int | text | s | rate | bytes | bool | usd | mode
    title: str = ""


COLUMNS: tuple[Column, ...] = (
    Column("hardware", "hardware", "text"), Column("mode", "mode", "mode"),
    Column("tp", "TP", title="tensor-parallel degree"), Column("pp", "PP", title="pipeline stages"),
    Column("ep", "EP", title="expert-parallel degree"), Column("batch", "batch", title="concurrent sequences per replica"),
    Column("replicas", "replicas", title="decode replicas (disaggregated: of the decode pool)"),
    Column("total_devices", "devices", title="all devices of the plan"),
    Column("ttft_s", "TTFT p90", "s", "90th-percentile time to first token"),
    Column("tpot_s", "TPOT", "s", "mean time per output token"),
    Column("tokens_per_s_per_device", "tok/s/device", "rate", "output tokens per second per device"),
    Column("tokens_per_s_per_user", "tok/s/user", "rate", "output tokens per second per user (1 / TPOT)"),
    Column("memory_per_device_bytes", "memory/device", "bytes", "weights + KV per device, decimal GB (10⁹ B)"),
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
    return (c.get("hardware"), c.get("mode"), c.get("tp"), c.get("pp"), c.get("ep"), c.get("batch"))


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
    if col.kind == "s":
        text = fmt_s(v)
    elif col.kind == "rate":
        text = num(v, 4)
    elif col.kind == "usd":
        text = _usd(v)
    elif col.kind == "mode":
        ratio = c.get("ratio")
        return {"text": Markup("{}<br><small>{}</small>").format(v, ratio) if ratio else v, "raw": v, "path": path,
                "title": "", "cls": ""}
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


def table(name: str, body: dict, cands: list[dict], view: View, best: int | None, pareto: set[int]) -> dict[str, Any]:
    """Header links and the rows shown: the best plan, the Pareto set and the first rows of the sorted rest."""
    ranked = order(cands, view)
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
                     "cells": [_cell(col, c, i) for col in COLUMNS]})
    if len(ranked) - 1 > last:
        rows.append({"gap": len(ranked) - 1 - last})
    heads = []
    for col in COLUMNS:
        active = view.sort == col.key
        heads.append({"key": col.key, "label": col.label, "title": col.title, "active": active,
                      "aria": ("descending" if view.desc else "ascending") if active else None,
                      "url": urls.calculator_view(name, body, fragment=ANCHOR,
                                                  **view.params(sort=col.key, desc=1 if active and not view.desc else None))})
    hidden = len(cands) - sum(1 for r in rows if "index" in r)
    return {"heads": heads, "rows": rows, "total": len(cands), "hidden": hidden, "view": view,
            "ranking_url": urls.calculator_view(name, body, fragment=ANCHOR, **view.params(sort=None, desc=None)),
            "all_url": urls.calculator_view(name, body, fragment=ANCHOR, **view.params(all=1)) if hidden and not view.all else None,
            "fewer_url": urls.calculator_view(name, body, fragment=ANCHOR, **view.params(all=None)) if view.all else None,
            "capped": view.all and len(cands) > MAX_ROWS, "limit": limit}


# --------------------------------------------------------------------------- chart

W, H = 720, 400
ML, MR, MT, MB = 70, 20, 18, 50


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


def _label(c: dict) -> str:
    bits = [f"{c.get('total_devices') or '?'} × {c['hardware']}", c["mode"], f"TP {c['tp']}"]
    if (c.get("pp") or 1) > 1:
        bits.append(f"PP {c['pp']}")
    if (c.get("ep") or 1) > 1:
        bits.append(f"EP {c['ep']}")
    bits.append(f"batch {c['batch']}")
    return ", ".join(bits)


def chart(cands: list[dict], tpot_slo: float | None, best: int | None, pareto: list[int]) -> dict[str, Any] | None:
    """Geometry of the Pareto chart: tokens/s per user (x) against tokens/s per device (y), every fitting
    candidate as a dot, the frontier as one path, the best plan marked, the TPOT SLO region shaded."""
    pts = [(i, c["tokens_per_s_per_user"], c["tokens_per_s_per_device"]) for i, c in enumerate(cands)
           if c.get("fits") and (c.get("tokens_per_s_per_user") or 0) > 0 and (c.get("tokens_per_s_per_device") or 0) > 0]
    if not pts:
        return None
    slo_x = 1.0 / tpot_slo if tpot_slo else None
    xs = [x for _, x, _ in pts] + ([slo_x] if slo_x else [])
    ys = [y for _, _, y in pts]
    sx_, sy_ = _scale(min(xs), max(xs), True), _scale(min(ys), max(ys), True)
    pw, ph = W - ML - MR, H - MT - MB

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
        "width": W, "height": H, "left": ML, "right": ML + pw, "top": MT, "bottom": MT + ph,
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
        wide = ML + pw - bx > 190
        geo["band"] = {"x": bx, "w": round(ML + pw - bx, 1), "tx": bx + 6 if wide else bx - 6, "anchor": "start" if wide else "end",
                       "label": f"TPOT SLO met: ≥ {num(slo_x, 4)} tok/s/user (TPOT ≤ {fmt_s(tpot_slo)})"}
    if best is not None and any(d["i"] == best for d in dots):
        c = cands[best]
        bx, by = sx(c["tokens_per_s_per_user"]), sy(c["tokens_per_s_per_device"])
        cost = f" · ${num(c['cost_per_mtok_usd'], 4)}/Mtok" if c.get("cost_per_mtok_usd") is not None else ""
        label = f"best: {_label(c)}{cost}"
        width = 6.6 * len(label)                 # about 11.5 px bold system-ui per character
        if bx + 12 + width <= ML + pw:           # to the right of the star
            tx, anchor = bx + 12, "start"
        elif bx - 12 - width >= ML:              # to its left
            tx, anchor = bx - 12, "end"
        else:                                    # neither fits: as far left as the plot allows, under or over the star
            tx, anchor = max(ML + 4.0, ML + pw - width), "start"
        ty = by + 22 if by < MT + 30 or anchor == "start" and tx < bx else by - 10
        ty = min(max(ty, MT + 12), MT + ph - 8)
        geo["best"] = {"x": bx, "y": by, "tx": round(tx, 1), "ty": round(ty, 1), "anchor": anchor, "label": label,
                       "star": _star(bx, by, 9.0), "box": {"x": round((tx if anchor == "start" else tx - width) - 3, 1),
                                                          "y": round(ty - 12, 1), "w": round(width + 6, 1), "h": 16}}
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
            "table": table(name, body, cands, view, best, set(pareto)), "sources": sources, "anchor": ANCHOR}


def visible_outputs(outputs: dict) -> dict:
    """The outputs the generic result table still lists (the candidates are this section's table)."""
    return {k: v for k, v in outputs.items() if k not in HIDDEN}
