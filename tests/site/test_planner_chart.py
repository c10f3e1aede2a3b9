"""The planner's Pareto chart as geometry, read back from the generated SVG: every mark lies strictly inside the
frame (the axis domain is padded, so extreme points are not drawn on it), and the best plan's label box covers no
mark, on computed plans and on made-up plans whose points crowd a corner or fill the whole plot.

The SVG is in user units; the chart scales as a whole (desktop) or keeps its size and scrolls (phone), so what
holds in user units holds at both widths. tests/site/test_browser.py checks the label's real text extent."""
from __future__ import annotations

import random
import re
import xml.etree.ElementTree as ET

import pytest

from api.site import planner
from api.site.chart_layout import text_width
from api.site.render import ENV
from api.urls import urls
from calculators.framework.registry import REGISTRY

NAME = "deployment-plan"
SVG = "{http://www.w3.org/2000/svg}"


def _svg(html: str) -> ET.Element:
    m = re.search(r'<svg class="pareto".*?</svg>', html, re.DOTALL)
    assert m, "no Pareto chart"
    return ET.fromstring(m.group(0))


def _cls(el: ET.Element) -> set[str]:
    return set((el.get("class") or "").split())


def _f(el: ET.Element, *names: str) -> list[float]:
    return [float(el.get(n)) for n in names]


def geometry(html: str) -> dict:
    """Frame, mark boxes (x0, y0, x1, y1), the best plan's star, label box and label lines, SLO label."""
    svg = _svg(html)
    view = [float(v) for v in svg.get("viewBox").split()]
    axes = [e for e in svg.iter(SVG + "line") if "axis" in _cls(e)]
    horizontal = next(e for e in axes if e.get("y1") == e.get("y2"))
    vertical = next(e for e in axes if e.get("x1") == e.get("x2"))
    left, right = _f(horizontal, "x1", "x2")
    top, bottom = _f(vertical, "y1", "y2")
    marks = []
    for e in svg.iter():
        if "pdot" not in _cls(e):
            continue
        if e.tag == SVG + "circle":
            cx, cy, r = _f(e, "cx", "cy", "r")
            marks.append((cx - r, cy - r, cx + r, cy + r))
        elif e.tag == SVG + "rect":
            x, y, w, h = _f(e, "x", "y", "width", "height")
            marks.append((x, y, x + w, y + h))
    stars = [e for e in svg.iter(SVG + "polygon") if "best-marker" in _cls(e)]
    star = None
    if stars:
        pts = [tuple(map(float, p.split(","))) for p in stars[0].get("points").split()]
        star = (min(p[0] for p in pts), min(p[1] for p in pts), max(p[0] for p in pts), max(p[1] for p in pts))
    box = next((e for e in svg.iter(SVG + "rect") if "best-box" in _cls(e)), None)
    lines = [(float(t.get("x")), float(t.get("y")), t.text or "") for t in svg.iter(SVG + "tspan")]
    slo = next((e for e in svg.iter(SVG + "text") if "slo-label" in _cls(e)), None)
    return {"view": view, "frame": (left, top, right, bottom), "marks": marks, "star": star,
            "box": (lambda x, y, w, h: (x, y, x + w, y + h))(*_f(box, "x", "y", "width", "height")) if box is not None else None,
            "lines": lines, "slo_y": float(slo.get("y")) if slo is not None else None}


def overlaps(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def check(g: dict) -> None:
    left, top, right, bottom = g["frame"]
    assert g["marks"], "no marks drawn"
    for m in g["marks"] + ([g["star"]] if g["star"] else []):
        assert left < m[0] and m[2] < right and top < m[1] and m[3] < bottom, f"mark {m} touches the frame {g['frame']}"
    if g["slo_y"] is not None:
        assert g["slo_y"] < top, "the SLO label is drawn inside the plot"
    box = g["box"]
    if box is None:
        return
    for m in g["marks"] + [g["star"]]:
        assert not overlaps(box, m), f"the best plan's label {box} covers the mark {m}"
    vx, vy, vw, vh = g["view"]
    assert vx <= box[0] and box[2] <= vx + vw and vy <= box[1] and box[3] <= vy + vh, "the label leaves the drawing"
    inside = left < box[0] and box[2] < right and top < box[1] and box[3] < bottom
    assert inside or box[1] > bottom, "the label straddles the frame"
    assert len(g["lines"]) == 2
    for x, y, text in g["lines"]:
        assert box[0] <= x and x + text_width(text, planner.LABEL_SIZE) <= box[2] + 0.5, f"{text!r} leaves its box"
        assert box[1] + 8 <= y <= box[3] - 2


# --------------------------------------------------------------------------- computed plans

PLANS = [
    dict(REGISTRY[NAME].example),
    {"model": "llama-3.1-70b", "arrival_rate_per_s": 10, "input_tokens": 2000, "output_tokens": 500, "ttft_s": 2, "tpot_s": 0.05},
    {"model": "qwen3-8b", "hardware": ["h100-sxm"], "arrival_rate_per_s": 2, "input_tokens": 1000, "output_tokens": 200,
     "ttft_s": 1, "tpot_s": 0.02},
]


@pytest.mark.parametrize("body", PLANS, ids=["example", "llama-70b-default-hardware", "qwen3-8b-one-device"])
def test_computed_plans_keep_marks_inside_and_the_label_off_them(client, body):
    r = client.get(urls.calculator(NAME, body))
    assert r.status_code == 200, r.text[:300]
    g = geometry(r.text)
    assert g["box"] is not None, "the best plan is not labelled"
    check(g)


# --------------------------------------------------------------------------- made-up plans

def candidate(x: float, y: float, k: int, meets: bool = True) -> dict:
    hw = ("h100-sxm", "b200-sxm", "mi300x")[k % 3]
    return {"hardware": hw, "mode": "aggregated" if k % 2 else "disaggregated", "ratio": None if k % 2 else "2 prefill : 4 decode",
            "tp": 2 ** (k % 4), "pp": 1, "ep": 1, "batch": 8 + k, "replicas": 1, "total_devices": 8,
            "ttft_s": 0.5, "tpot_s": 1 / x, "tokens_per_s_per_user": x, "tokens_per_s_per_device": y,
            "memory_per_device_bytes": {"total": 5e10, "weights": 4e10, "kv": 1e10}, "fits": True, "meets_slo": meets,
            "cost_per_hour_usd": 30.0, "cost_per_mtok_usd": 1.0 + k / 1000, "reason": None if meets else "misses the TTFT SLO"}


def render(cands: list[dict], best: int, tpot_s: float = 0.05) -> str:
    out = {"candidates": cands, "best": cands[best], "pareto": [cands[best]], "headline": "made up",
           "configurations_evaluated": len(cands), "meeting_slo": sum(c["meets_slo"] for c in cands)}
    section = planner.section(NAME, {"model": "x"}, {"outputs": out, "inputs": {"tpot_s": tpot_s, "ttft_s": 1.0}}, planner.View())
    return ENV.get_template(section["template"]).render(extra=section, e={})


def crowd(x: tuple[float, float], y: tuple[float, float], n: int, seed: int) -> list[tuple[float, float]]:
    rnd = random.Random(seed)
    return [(rnd.uniform(*x), rnd.uniform(*y)) for _ in range(n)]


CORNERS = {
    # points packed into the top-right corner, the best plan the most extreme of them
    "top-right": (crowd((180, 200), (900, 1000), 400, 1) + [(30, 40), (60, 300), (120, 80)], (200.0, 1000.0)),
    # packed into the bottom-left, the best plan at the smallest values (the SLO at the left edge too)
    "bottom-left": (crowd((20, 22), (1, 1.3), 400, 2) + [(150, 900), (90, 400)], (20.0, 1.0)),
    # a narrow range (linear axes) whose best plan is the largest on both: no room near the star, in or under
    "linear-top-right": (crowd((24, 30), (100, 150), 60, 3), (30.0, 150.0)),
    # the whole plot filled: no free place, the label goes under the chart
    "full": ([(20 * 1.0035 ** i, 10 * 1.0045 ** j) for i in range(0, 600, 12) for j in range(0, 1000, 20)], (120.0, 400.0)),
    "single": ([], (40.0, 500.0)),
}


@pytest.mark.parametrize("name", list(CORNERS))
def test_made_up_plans_crowding_a_corner(name):
    pts, best_xy = CORNERS[name]
    cands = [candidate(x, y, k) for k, (x, y) in enumerate(pts)] + [candidate(*best_xy, len(pts))]
    g = geometry(render(cands, len(cands) - 1))
    assert g["box"] is not None
    check(g)
    below = g["box"][1] > g["frame"][3]
    if name in ("full", "top-right", "bottom-left", "single"):   # no room at all / room beside the star
        assert below == (name == "full"), f"{name}: the label is {'under' if below else 'inside'} the chart"


def test_the_label_sits_beside_its_star_when_there_is_room():
    cands = [candidate(x, y, k) for k, (x, y) in enumerate([(30, 100), (60, 300), (120, 80), (25, 600)])]
    g = geometry(render(cands, 1))
    star, box = g["star"], g["box"]
    gap_x = max(box[0] - star[2], star[0] - box[2], 0)
    gap_y = max(box[1] - star[3], star[1] - box[3], 0)
    assert gap_x < 20 and gap_y < 20, (star, box)
    check(g)
