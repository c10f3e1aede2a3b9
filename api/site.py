"""The HTML explainer site: GET pages over the store and the calculators, without JavaScript.

Every page is a thin view: it reads the store (or calls `api.service.calculate`) and hands plain
data to one Jinja template under `templates/`. Each page links its JSON twin under /api/v1.
`mount(app)` adds the routes, the static files and `app.state.render_not_found` (the app's 404
handlers call it for unknown ids and paths outside the API).
"""
from __future__ import annotations

import json
import logging
import math
from collections import OrderedDict
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape
from starlette.responses import HTMLResponse, RedirectResponse

from api import charts
from api.routes.common import NotFound
from api.service import CalculationFailed, calculate, case_refs, explanation_url
from calculators.core import fmt_s, num
from calculators.registry import REGISTRY, Calculator
from knowledge.coverage import coverage
from knowledge.store import Page as StorePage
from knowledge.store import Store

log = logging.getLogger("casebook.site")

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
STATIC = ROOT / "static"
BOOK_REPO = "https://github.com/bojieli/ai-infra-book"

router = APIRouter(include_in_schema=False)


# =========================================================================== formatting (presentation only)

def _abbr(unit: str, title: str) -> Markup:
    return Markup('<abbr title="{}">{}</abbr>').format(title, unit)


DEC = ((1e15, "PB", "10¹⁵ bytes (decimal)"), (1e12, "TB", "10¹² bytes (decimal)"), (1e9, "GB", "10⁹ bytes (decimal)"),
       (1e6, "MB", "10⁶ bytes (decimal)"), (1e3, "kB", "10³ bytes (decimal)"))
BIN = ((2**50, "PiB", "2⁵⁰ bytes (binary)"), (2**40, "TiB", "2⁴⁰ bytes (binary)"), (2**30, "GiB", "2³⁰ bytes (binary)"),
       (2**20, "MiB", "2²⁰ bytes (binary)"), (2**10, "KiB", "2¹⁰ bytes (binary)"))


def _scaled(v: float, table) -> tuple[float, str, str] | None:
    for factor, unit, title in table:
        if abs(v) >= factor:
            return v / factor, unit, title
    return None


def human_bytes(v: float, per: str = "") -> Markup:
    """`80 GB = 74.51 GiB` with both prefixes labelled (decimal and binary)."""
    if abs(v) < 1000:
        return Markup("{} B{}").format(num(v), per)
    d = _scaled(v, DEC)
    b = _scaled(v, BIN)
    parts = [Markup("{} {}{}").format(num(d[0], 4), _abbr(d[1], d[2]), per)]
    if b:
        parts.append(Markup("{} {}{}").format(num(b[0], 4), _abbr(b[1], b[2]), per))
    return Markup(" = ").join(parts)


def _si(v: float, unit: str, digits: int = 4) -> str:
    for factor, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= factor:
            return f"{num(v / factor, digits)} {prefix}{unit}"
    return f"{num(v, digits)} {unit}"


def human(key: str, value: Any) -> Markup | str:
    """A reading of a number for people, chosen by the unit its field name carries ('' when none)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return ""
    v = float(value)
    if not math.isfinite(v):
        return ""
    k = key.lower()
    if v == 0:
        return ""
    words = k.split("_")
    if k.endswith("bytes_per_s"):
        return human_bytes(v, "/s")
    if "bytes" in words:  # bytes, kv_bytes, bytes_per_token, per_device_bytes_per_request …
        return human_bytes(v)
    if k.endswith("_bits_per_s"):
        return _si(v, "bit/s")
    if k.endswith(("_flop_per_s", "_flops_per_s")):
        return _si(v, "FLOP/s")
    if k.endswith("_flops") or k == "flops":
        return _si(v, "FLOP")
    if k.endswith("_usd_per_mtok"):
        return f"${num(v, 4)} per 10⁶ tokens"
    if k.endswith("_usd"):
        return f"${num(v, 6)}"
    if k.endswith("_w"):
        return _si(v, "W")
    if k.endswith("_j"):
        return _si(v, "J")
    if k.endswith("_s") and not k.endswith(("_per_s", "tokens", "_rounds")):
        return fmt_s(v)
    return ""


UNIT_KEYS = {"b": "x_bytes", "bytes": "x_bytes", "byte": "x_bytes", "b/s": "x_bytes_per_s", "bytes/s": "x_bytes_per_s",
             "bit/s": "x_bits_per_s", "s": "x_s", "seconds": "x_s", "flop": "x_flops", "flops": "x_flops",
             "flop/s": "x_flop_per_s", "w": "x_w", "j": "x_j", "usd": "x_usd"}


def unit_key(unit: str) -> str:
    """A step's unit as a field name suffix, so that `human` can add a reading (B → GB and GiB)."""
    return UNIT_KEYS.get(str(unit or "").strip().lower(), "")


def step_reading(value: Any, unit: str) -> Markup | str:
    """A step value's reading in other units, when it says more than `value unit`."""
    r = human(unit_key(unit), value)
    if not r or str(r) == f"{num(value, 8)} {unit}" or str(r) == f"{num(value, 5)} {unit}":
        return ""
    return r


def show(value: Any) -> str:
    """The number itself, as computed (thousands separators; scientific for extremes)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        return num(value, 8)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def raw(value: Any) -> str:
    """A value for a data-value attribute: machine-readable (no separators), lists and objects as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def pretty_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def is_fact(node: Any) -> bool:
    return isinstance(node, dict) and "value" in node and "source" in node


def iter_facts(node: Any, path: str = ""):
    """Every sourced number of a record: (dotted field path, fact)."""
    if is_fact(node):
        yield path, node
        return
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("layer_groups_provenance",):
                continue
            yield from iter_facts(v, f"{path}.{k}" if path else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from iter_facts(v, f"{path}.{i}")


def cited_sources(*records: Any) -> list[str]:
    """Source ids cited anywhere in the given records, in first-seen order."""
    seen: dict[str, None] = {}

    def walk(node):
        if isinstance(node, dict):
            src = node.get("source") if "source" in node else node.get("source_id")
            if isinstance(src, str):
                seen.setdefault(src)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for r in records:
        walk(r)
    return list(seen)


def flatten_outputs(outputs: dict, prefix: str = "") -> list[dict]:
    """Output rows for the result table: scalars, short lists, and lists of objects as sub-tables."""
    rows = []
    for key, value in outputs.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            rows.extend(flatten_outputs(value, path))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            cols: list[str] = []
            for v in value:
                for c in v:
                    if c not in cols:
                        cols.append(c)
            table = [[(c, v.get(c), f"{path}.{i}.{c}") for c in cols] for i, v in enumerate(value)]
            rows.append({"path": path, "key": key, "table": {"cols": cols, "rows": table}})
        elif isinstance(value, list):
            rows.append({"path": path, "key": key, "list": value, "n": len(value)})
        else:
            rows.append({"path": path, "key": key, "value": value})
    return rows


# =========================================================================== templates

def _env() -> Environment:
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(("html", "j2")),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=lambda v, d=6: num(v, d) if isinstance(v, (int, float)) and not isinstance(v, bool) else show(v),
                       human=human, show=show, raw=raw, pretty=pretty_json, compact=compact_json, bytes=human_bytes,
                       seconds=fmt_s, urlq=lambda d: urlencode(d, doseq=True))
    env.globals.update(reading=human, unit_key=unit_key, step_reading=step_reading, is_fact=is_fact, iter_facts=iter_facts, layout=charts.layout, chart_table=charts.table_rows,
                       isnumber=lambda v: isinstance(v, (int, float)) and not isinstance(v, bool))
    return env


ENV = _env()

NAV = [("/", "Home"), ("/cases", "Cases"), ("/calculators", "Calculators"), ("/models", "Models"),
       ("/hardware", "Hardware"), ("/links", "Links"), ("/frameworks", "Frameworks"), ("/prices", "Prices"),
       ("/sources", "Sources"), ("/coverage", "Coverage"), ("/claims", "Claims"), ("/glossary", "Glossary")]


def render(request: Request, template: str, *, title: str, twin: str | None, status: int = 200,
           sources: list[str] | None = None, **ctx) -> HTMLResponse:
    store: Store | None = request.app.state.store
    cited = []
    for sid in sources or []:
        s = store.get("source", sid) if store else None
        cited.append({"id": sid, "title": (s or {}).get("title", sid), "url": (s or {}).get("url"),
                      "license": (s or {}).get("license"), "known": s is not None})
    html = ENV.get_template(template).render(
        request=request, title=title, twin=twin, nav=NAV, path=request.url.path, cited=cited,
        version=request.app.state.settings.version, content_hash=(store.content_hash[:12] if store else ""),
        built_at=(store.meta.get("built_at") if store else None), book_repo=BOOK_REPO, **ctx)
    return HTMLResponse(html, status_code=status)


def twin_url(request: Request, path: str | None = None, keep: tuple[str, ...] | None = None) -> str:
    """The /api/v1 URL answering the same question as this page (same filters)."""
    path = path or "/api/v1" + request.url.path
    params = [(k, v) for k, v in request.query_params.multi_items() if v != "" and (keep is None or k in keep)]
    return path + ("?" + urlencode(params) if params else "")


class BadQuery(Exception):
    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


def q_int(request: Request, name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = request.query_params.get(name, "")
    if raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise BadQuery(name, f"must be an integer (got {raw!r})") from None
    if not lo <= v <= hi:
        raise BadQuery(name, f"must be between {lo} and {hi} (got {v})")
    return v


def q_str(request: Request, name: str, max_length: int = 200) -> str | None:
    raw = request.query_params.get(name, "").strip()
    if len(raw) > max_length:
        raise BadQuery(name, f"at most {max_length} characters")
    return raw or None


def q_choice(request: Request, name: str, choices: tuple[str, ...]) -> str | None:
    raw = request.query_params.get(name, "")
    if raw == "":
        return None
    if raw not in choices:
        raise BadQuery(name, f"must be one of {', '.join(choices)} (got {raw!r})")
    return raw


def q_bool(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name, "").lower()
    if raw == "":
        return None
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise BadQuery(name, f"must be true or false (got {raw!r})")


def bad_query_page(request: Request, exc: BadQuery) -> HTMLResponse:
    problem = {"title": "Invalid request", "status": 422, "detail": f"invalid field(s): {exc.field}",
               "errors": [{"field": exc.field, "in": "query", "message": exc.message}]}
    return render(request, "error.html.j2", title="Invalid request", twin=None, status=422, problem=problem,
                  back=request.url.path)


def pager(request: Request, page) -> dict:
    def link(offset: int) -> str:
        return _rel(request, offset=offset, limit=page.limit)
    prev_off = max(page.offset - page.limit, 0)
    return {"total": page.total, "limit": page.limit, "offset": page.offset, "shown": len(page.items),
            "prev": link(prev_off) if page.offset > 0 else None,
            "next": link(page.offset + page.limit) if page.offset + page.limit < page.total else None}


def _rel(request: Request, **changes) -> str:
    """This page's path with some query parameters replaced (relative, same origin)."""
    params = OrderedDict((k, v) for k, v in request.query_params.multi_items() if v != "")
    for k, v in changes.items():
        if v is None:
            params.pop(k, None)
        else:
            params[k] = v
    return request.url.path + ("?" + urlencode(params) if params else "")


def sort_links(request: Request, columns: tuple[str, ...]) -> dict:
    """Per sortable column: the URL sorting by it (toggling the direction when already sorted)."""
    current = request.query_params.get("sort")
    desc = request.query_params.get("desc", "").lower() in ("1", "true")
    out = {}
    for c in columns:
        nd = (not desc) if c == current else False
        out[c] = {"url": _rel(request, sort=c, desc="true" if nd else None, offset=None),
                  "active": c == current, "desc": desc if c == current else None}
    return out


def distinct(store: Store, kind: str, field: str) -> list[str]:
    return sorted({str(r[field]) for r in store.all(kind) if r.get(field) not in (None, "")}, key=str.lower)


def store_of(request: Request) -> Store:
    return request.app.state.store


def fact_url(kind: str, rid: str) -> str:
    return {"hardware": f"/hardware/{rid}", "model": f"/models/{rid}", "link": f"/links#{rid}",
            "price": f"/prices#{rid}", "framework": f"/frameworks/{rid}"}.get(kind, f"/search?q={rid}")


# =========================================================================== pages: home, cases

@router.get("/", response_class=HTMLResponse)
def home(request: Request):
    store = store_of(request)
    sections: OrderedDict[str, dict] = OrderedDict()
    for c in store.all("case"):
        key = c.get("section") or "—"
        sec = sections.setdefault(key, {"section": key, "section_en": c.get("section_en"), "cases": []})
        sec["cases"].append(c)
    counts = {k: store.count(k) for k in ("case", "derivation", "model", "hardware", "link", "framework", "price",
                                           "source", "claim", "glossary")}
    cov = coverage(store.all("case"), store.all("derivation"))
    return render(request, "home.html.j2", title="AI Infra Casebook", twin="/api/v1/cases", sections=list(sections.values()),
                  counts=counts, calculators=list(REGISTRY.values()), cov=cov)


@router.get("/cases", response_class=HTMLResponse)
def cases_page(request: Request):
    store = store_of(request)
    try:
        chapter = q_int(request, "chapter", None, 1, 99)
        section = q_int(request, "section", None, 1, 99)
        q = q_str(request, "q")
        limit = q_int(request, "limit", 100, 1, 1000)
        offset = q_int(request, "offset", 0, 0, 1_000_000)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    contains = {}
    if chapter is not None:
        contains["chapters"] = f",{chapter},"
    if q:
        contains["title_en"] = q
    page = store.list("case", {"section_order": section}, limit, offset, contains=contains)
    per_case = {row["slug"]: row for row in coverage(store.all("case"), store.all("derivation"))["per_case"]}
    sections = sorted({(c.get("section_order") or 99, c.get("section") or "") for c in store.all("case")})
    chapters = sorted({ch for c in store.all("case") for ch in c.get("cited_chapters") or []})
    return render(request, "cases.html.j2", title="Cases", twin=twin_url(request), page=page, pager=pager(request, page),
                  per_case=per_case, sections=sections, chapters=chapters,
                  filters={"chapter": chapter, "section": section, "q": q or ""})


@router.get("/cases/{slug}", response_class=HTMLResponse)
def case_page(request: Request, slug: str):
    store = store_of(request)
    case = store.get("case", slug)
    if case is None:
        raise NotFound("case", slug, "/api/v1/cases")
    derivations = []
    for d in store.derivations_of(slug):
        d = dict(d)
        calc = REGISTRY.get(d.get("calculator") or "")
        d["recompute_url"] = _recompute_url(d)
        d["calculator_title"] = calc.title if calc else None
        derivations.append(d)
    uses = []
    for kind, ids in (case.get("uses") or {}).items():
        k = {"models": "model", "hardware": "hardware", "links": "link", "frameworks": "framework"}.get(kind, kind)
        items = []
        for i in ids or []:
            rec = store.get(k, i)
            items.append({"id": i, "name": (rec or {}).get("name", i), "url": fact_url(k, i), "known": rec is not None})
        uses.append({"kind": kind, "items": items})
    calcs = [c for c in REGISTRY.values() if slug in c.cases]
    return render(request, "case.html.j2", title=f"{case['title_zh']} — {case['title_en']}",
                  twin=f"/api/v1/cases/{slug}", case=case, derivations=derivations, uses=uses,
                  related=case_refs(store, case.get("related") or []), calculators=calcs,
                  bound=sum(1 for d in derivations if d.get("calculator")))


# =========================================================================== pages: facts

HARDWARE_SORT = ("name", "vendor", "memory_bytes", "memory_bandwidth_bytes_per_s", "power_w")
MODEL_SORT = ("name", "family", "layers", "hidden_size", "params_total", "params_active")


def _list_params(request: Request, sorts: tuple[str, ...] = ()) -> tuple[int, int, str | None, bool]:
    limit = q_int(request, "limit", 50, 1, 1000)
    offset = q_int(request, "offset", 0, 0, 1_000_000)
    sort = q_choice(request, "sort", sorts) if sorts else None
    desc = bool(q_bool(request, "desc"))
    return limit, offset, sort, desc


@router.get("/hardware", response_class=HTMLResponse)
def hardware_page(request: Request):
    store = store_of(request)
    try:
        limit, offset, sort, desc = _list_params(request, HARDWARE_SORT)
        f = {k: q_str(request, k, 100) for k in ("vendor", "architecture", "scope")}
        q = q_str(request, "q")
    except BadQuery as exc:
        return bad_query_page(request, exc)
    page = store.list("hardware", f, limit, offset, sort, desc, contains={"name": q} if q else None)
    options = {k: distinct(store, "hardware", k) for k in f}
    bf16 = {h["id"]: next((p.get("flop_per_s") for p in h.get("peaks") or []
                           if str(p.get("input_precision")).upper() == "BF16" and p.get("sparsity") == "dense"), None)
            for h in page.items}
    return render(request, "hardware_list.html.j2", title="Hardware", twin=twin_url(request), page=page, bf16=bf16,
                  pager=pager(request, page), sorts=sort_links(request, HARDWARE_SORT), filters={**f, "q": q or ""},
                  options=options, sources=cited_sources(page.items))


@router.get("/hardware/{hardware_id}", response_class=HTMLResponse)
def hardware_detail(request: Request, hardware_id: str):
    store = store_of(request)
    hw = store.get("hardware", hardware_id)
    if hw is None:
        raise NotFound("hardware", hardware_id, "/api/v1/hardware")
    links = [{"id": i, "name": (store.get("link", i) or {}).get("name", i)} for i in hw.get("links") or []]
    cases = [c for c in store.all("case") if hardware_id in ((c.get("uses") or {}).get("hardware") or [])]
    return render(request, "hardware.html.j2", title=hw["name"], twin=f"/api/v1/hardware/{hardware_id}", hw=hw,
                  links=links, cases=cases, facts=list(iter_facts(hw)), sources=cited_sources(hw))


@router.get("/models", response_class=HTMLResponse)
def models_page(request: Request):
    store = store_of(request)
    try:
        limit, offset, sort, desc = _list_params(request, MODEL_SORT)
        f = {k: q_str(request, k, 100) for k in ("family", "kind", "attention")}
        q = q_str(request, "q")
    except BadQuery as exc:
        return bad_query_page(request, exc)
    page = store.list("model", f, limit, offset, sort, desc, contains={"name": q} if q else None)
    options = {k: distinct(store, "model", k) for k in f}
    return render(request, "models_list.html.j2", title="Models", twin=twin_url(request), page=page,
                  pager=pager(request, page), sorts=sort_links(request, MODEL_SORT), filters={**f, "q": q or ""},
                  options=options, sources=cited_sources(page.items))


def _live(name: str, body: dict, store: Store, keys: tuple[str, ...]) -> dict:
    """A calculator's answer for a fact page, degrading to a note when it is absent or refuses."""
    if name not in REGISTRY:
        return {"name": name, "available": False, "note": f"the {name} calculator is not registered yet"}
    try:
        env = calculate(name, body, store)
    except CalculationFailed as exc:
        return {"name": name, "available": False, "note": exc.body.get("detail", "could not compute"),
                "url": explanation_url(name, body)}
    values = [(k, env["outputs"].get(k)) for k in keys if env["outputs"].get(k) is not None]
    return {"name": name, "available": True, "values": values, "url": env["explanation_url"], "title": REGISTRY[name].title}


@router.get("/models/{model_id}", response_class=HTMLResponse)
def model_detail(request: Request, model_id: str):
    store = store_of(request)
    m = store.get("model", model_id)
    if m is None:
        raise NotFound("model", model_id, "/api/v1/models")
    live = [
        _live("kv-cache", {"model": model_id, "tokens": 8192}, store,
              ("values_per_token", "bytes_per_token", "bytes_per_request", "state_bytes")),
        _live("weight-memory", {"model": model_id}, store, ("params_total", "params_active", "bytes_total", "bits_per_param")),
    ]
    cases = [c for c in store.all("case") if model_id in ((c.get("uses") or {}).get("models") or [])]
    return render(request, "model.html.j2", title=m["name"], twin=f"/api/v1/models/{model_id}", model=m, live=live,
                  cases=cases, facts=list(iter_facts(m)), sources=cited_sources(m))


@router.get("/frameworks", response_class=HTMLResponse)
def frameworks_page(request: Request):
    store = store_of(request)
    try:
        limit, offset, _, _ = _list_params(request)
        kind = q_str(request, "kind", 100)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    page = store.list("framework", {"kind": kind}, limit, offset)
    return render(request, "frameworks_list.html.j2", title="Frameworks", twin=twin_url(request), page=page,
                  pager=pager(request, page), filters={"kind": kind or ""},
                  options={"kind": distinct(store, "framework", "kind")}, sources=cited_sources(page.items))


@router.get("/frameworks/{framework_id}", response_class=HTMLResponse)
def framework_detail(request: Request, framework_id: str):
    store = store_of(request)
    fw = store.get("framework", framework_id)
    if fw is None:
        raise NotFound("framework", framework_id, "/api/v1/frameworks")
    cases = [c for c in store.all("case") if framework_id in ((c.get("uses") or {}).get("frameworks") or [])]
    return render(request, "framework.html.j2", title=fw["name"], twin=f"/api/v1/frameworks/{framework_id}", fw=fw,
                  cases=cases, sources=cited_sources(fw))


@router.get("/links", response_class=HTMLResponse)
def links_page(request: Request):
    store = store_of(request)
    try:
        limit, offset, _, _ = _list_params(request)
        kind = q_str(request, "kind", 100)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    page = store.list("link", {"kind": kind}, limit, offset)
    return render(request, "links.html.j2", title="Interconnects", twin=twin_url(request), page=page,
                  pager=pager(request, page), filters={"kind": kind or ""},
                  options={"kind": distinct(store, "link", "kind")}, sources=cited_sources(page.items))


@router.get("/links/{link_id}", response_class=HTMLResponse)
def link_detail(request: Request, link_id: str):
    if store_of(request).get("link", link_id) is None:
        raise NotFound("link", link_id, "/api/v1/links")
    return RedirectResponse(f"/links#{link_id}", status_code=303)


@router.get("/prices", response_class=HTMLResponse)
def prices_page(request: Request):
    store = store_of(request)
    try:
        limit, offset, _, _ = _list_params(request)
        provider = q_str(request, "provider", 100)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    page = store.list("price", {"provider": provider}, limit, offset)
    return render(request, "prices.html.j2", title="Prices", twin=twin_url(request), page=page,
                  pager=pager(request, page), filters={"provider": provider or ""},
                  options={"provider": distinct(store, "price", "provider")},
                  columns=("input_usd_per_mtok", "cache_read_usd_per_mtok", "cache_write_usd_per_mtok", "output_usd_per_mtok"),
                  sources=cited_sources(page.items))


@router.get("/sources", response_class=HTMLResponse)
def sources_page(request: Request):
    store = store_of(request)
    try:
        limit, offset, _, _ = _list_params(request)
        kind = q_str(request, "kind", 100)
        publisher = q_str(request, "publisher", 200)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    page = store.list("source", {"kind": kind, "publisher": publisher}, limit, offset)
    return render(request, "sources_list.html.j2", title="Sources", twin=twin_url(request), page=page,
                  pager=pager(request, page), filters={"kind": kind or "", "publisher": publisher or ""},
                  options={"kind": distinct(store, "source", "kind"), "publisher": distinct(store, "source", "publisher")})


@router.get("/sources/{source_id}", response_class=HTMLResponse)
def source_detail(request: Request, source_id: str):
    store = store_of(request)
    src = store.get("source", source_id)
    if src is None:
        raise NotFound("source", source_id, "/api/v1/sources")
    facts = store.facts_from_source(source_id)
    for f in facts:
        rec = store.get(f["kind"], f["record_id"]) or {}
        f["url"] = fact_url(f["kind"], f["record_id"])
        f["name"] = rec.get("name", f["record_id"])
    also = []
    for fw in store.all("framework"):
        for feat in fw.get("features") or []:
            if feat.get("source") == source_id:
                also.append({"what": f"{fw['name']}: {feat.get('name') or feat.get('feature')}", "url": f"/frameworks/{fw['id']}",
                             "locator": feat.get("locator")})
    for m in store.all("model"):
        prov = m.get("layer_groups_provenance") or {}
        if prov.get("source") == source_id:
            also.append({"what": f"{m['name']}: layer groups", "url": f"/models/{m['id']}", "locator": prov.get("locator")})
    return render(request, "source.html.j2", title=src.get("title", source_id), twin=f"/api/v1/sources/{source_id}",
                  src=src, facts=facts, also=also, sources=[source_id])


# =========================================================================== pages: calculators

def field_specs(calc: Calculator) -> list[dict]:
    """One form field per top-level request property, from the request model's JSON schema."""
    schema = calc.request_model.model_json_schema()
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))

    def deref(s: dict) -> dict:
        while isinstance(s, dict) and "$ref" in s:
            s = defs.get(s["$ref"].rsplit("/", 1)[-1], {})
        return s

    out = []
    for name, prop in (schema.get("properties") or {}).items():
        kinds, enum, is_array = set(), [], False
        stack = [prop]
        while stack:
            s = deref(stack.pop())
            if "anyOf" in s or "oneOf" in s:
                stack.extend(s.get("anyOf") or s.get("oneOf"))
                continue
            if "enum" in s:
                kinds.add("enum")
                enum.extend(str(e) for e in s["enum"])
                continue
            if "const" in s:
                kinds.add("enum")
                enum.append(str(s["const"]))
                continue
            t = s.get("type")
            if t == "array":
                is_array = True
                item = deref(s.get("items") or {})
                kinds.add("list" if item.get("type") in ("number", "integer", "string") and "enum" not in item else "json")
            elif t == "object" or "properties" in s:
                kinds.add("json")
            elif t in ("number", "integer", "string", "boolean", "null"):
                kinds.add(t)
            elif not s:
                kinds.add("json")
        kinds.discard("null")
        if "json" in kinds:
            widget = "textarea"
        elif kinds == {"boolean"}:
            widget = "bool"
        elif kinds == {"enum"}:
            widget = "select"
        else:
            widget = "input"
        out.append({"name": name, "title": prop.get("title", name), "description": prop.get("description", ""),
                    "default": prop.get("default"), "has_default": "default" in prop, "required": name in required,
                    "kinds": sorted(kinds), "widget": widget, "enum": list(dict.fromkeys(enum)),
                    "sweepable": name in calc.sweepable, "string_only": kinds <= {"string", "enum"},
                    "array": is_array,
                    "schema": prop})
    return out


def parse_field(spec: dict, raw: str) -> Any:
    """A form value as JSON for the request: numbers, lists (`1, 2, 4` or `[1, 2, 4]`), objects, strings."""
    raw = raw.strip()
    if spec["string_only"]:
        return raw
    if spec["widget"] == "bool":
        return raw.lower() in ("true", "1", "yes", "on")
    try:
        return json.loads(raw)
    except ValueError:
        pass
    if (spec["array"] or spec["sweepable"]) and "," in raw:
        return [_scalar(part) for part in raw.split(",") if part.strip()]
    if "string" in spec["kinds"] or "enum" in spec["kinds"]:
        return raw
    if spec["widget"] == "textarea":
        raise BadQuery(spec["name"], "is not valid JSON")
    return raw  # the request model names the problem


def _scalar(part: str) -> Any:
    part = part.strip()
    try:
        return json.loads(part)
    except ValueError:
        return part


def field_text(value: Any, widget: str = "input") -> str:
    """A request value as the text of its form field (what `parse_field` reads back)."""
    if value is None:
        return ""
    if widget == "textarea":
        if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
            return pretty_json(value)
        return value if isinstance(value, str) else compact_json(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)) and (isinstance(value, dict) or any(isinstance(v, (dict, list)) for v in value)):
        return pretty_json(value)
    if isinstance(value, list):
        return ", ".join(show_plain(v) for v in value)
    return show_plain(value)


def show_plain(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v)) if abs(v) < 1e6 else repr(v)
    return json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v


def _problem(status: int, title: str, detail: str, errors: list[dict]) -> dict:
    return {"title": title, "status": status, "detail": detail, "errors": errors}


def _request_from_query(request: Request, calc: Calculator, specs: list[dict]) -> tuple[dict | None, str, dict | None]:
    """(body, how it was given, problem): `body` JSON and/or individual fields; the example when neither."""
    raw_body = request.query_params.get("body", "").strip()
    body: dict = {}
    given = "example"
    if raw_body:
        given = "body"
        try:
            parsed = json.loads(raw_body)
        except ValueError as exc:
            return None, given, _problem(422, "Invalid request", "body: not valid JSON",
                                         [{"field": "body", "in": "query", "message": f"not valid JSON: {exc}"}])
        if not isinstance(parsed, dict):
            return None, given, _problem(422, "Invalid request", "body: must be a JSON object",
                                         [{"field": "body", "in": "query", "message": "must be a JSON object"}])
        body = parsed
    by_name = {s["name"]: s for s in specs}
    errors = []
    for key, raw in request.query_params.multi_items():
        spec = by_name.get(key)
        if spec is None or raw.strip() == "":
            continue
        given = "fields" if given == "example" else "body+fields"
        try:
            body[key] = parse_field(spec, raw)
        except BadQuery as exc:
            errors.append({"field": exc.field, "in": "query", "message": exc.message})
    if errors:
        return body, given, _problem(422, "Invalid request", "invalid field(s): " + ", ".join(e["field"] for e in errors), errors)
    if given == "example":
        body = dict(calc.example)
    return body, given, None


def _field_schema(calc: Calculator, specs: list[dict], name: str) -> dict | None:
    """JSON schema of a request field, top level or inside a nested object (for sweep ranges)."""
    schema = next((s["schema"] for s in specs if s["name"] == name), None)
    if schema is None:
        for d in (calc.request_model.model_json_schema().get("$defs") or {}).values():
            if name in (d.get("properties") or {}):
                return d["properties"][name]
    return schema


def _charts(calc: Calculator, body: dict, envelope: dict, store: Store, specs: list[dict]) -> list[dict]:
    """Charts of this result: its variants side by side, its own sweep, or sweeps around it (previews)."""
    if calc.chart is None:
        return []
    out = []
    try:
        variants = charts.extract_variants(calc.chart, envelope["outputs"], title=calc.title)
        if variants:
            out.append({"data": variants, "caption": "your request and its variants, part by part", "url": None})
        data = charts.extract(calc.chart, body, envelope["outputs"], title=calc.title)
        if data:
            out.append({"data": data, "caption": "the sweep of your request", "url": None})
            return out
        # one line per value of a field (KV bytes per format); stacked bars keep the request's own value
        values: list = [None]
        compare = COMPARE.get(calc.name)
        if compare and calc.chart.kind == "line" and compare[0] in {s["name"] for s in specs}:
            current = body.get(compare[0])
            values = list(dict.fromkeys(([current] if isinstance(current, str) else []) + list(compare[1])))
        for caption, derived, current in charts.derived_bodies(calc.chart, body, _field_schema(calc, specs, calc.chart.x)):
            merged, url = None, None
            for v in values:
                b = derived if v is None else {**derived, compare[0]: v}
                try:
                    env = calculate(calc.name, b, store)
                except CalculationFailed:
                    continue
                d = charts.extract(calc.chart, b, env["outputs"], title=calc.title, highlight=current)
                if d is None:
                    continue
                if v is not None:
                    for s in d.series:
                        s.name = str(v) if len(d.series) == 1 else f"{s.name} ({v})"
                if merged is None:
                    merged, url = d, explanation_url(calc.name, b)
                else:
                    merged.series.extend(d.series)
            if merged is not None:
                if len(values) > 1:
                    caption += f"; one line per {compare[0]}"
                out.append({"data": merged, "caption": caption, "url": url})
    except Exception:  # a chart must never take the page down: log it and show the numbers without it
        log.exception("chart of %s failed", calc.name)
    return out


#: sweep previews that draw one line per value of a request field (e.g. KV bytes vs tokens per format)
COMPARE = {"kv-cache": ("kv_format", ("bf16", "fp8", "q4_0")),
           "weight-memory": ("format", ("bf16", "fp8", "int4"))}


@router.get("/calculators", response_class=HTMLResponse)
def calculators_page(request: Request):
    store = store_of(request)
    calcs = [{"calc": c, "cases": case_refs(store, c.cases), "url": f"/calculators/{c.name}"} for c in REGISTRY.values()]
    return render(request, "calculators.html.j2", title="Calculators", twin="/api/v1/calculators", calcs=calcs)


@router.get("/calculators/{name}", response_class=HTMLResponse)
def calculator_page(request: Request, name: str):
    store = store_of(request)
    calc = REGISTRY.get(name)
    if calc is None:
        raise NotFound("calculator", name, "/api/v1/calculators")
    specs = field_specs(calc)
    body, given, problem = _request_from_query(request, calc, specs)
    envelope, status, chart_list = None, 200, []
    if problem is None:
        try:
            envelope = calculate(name, body, store)
        except CalculationFailed as exc:
            problem, status = exc.body, exc.status
        else:
            chart_list = _charts(calc, body, envelope, store, specs)
    if problem is not None:
        status = problem.get("status", 422) if status == 200 else status
    values = {s["name"]: field_text((body or {}).get(s["name"]), s["widget"]) for s in specs}
    # the permalink carries the body as given (it computed); the envelope's own URL drops defaults
    permalink = explanation_url(name, body) if envelope is not None else None
    return render(request, "calculator.html.j2", title=calc.title, twin=f"/api/v1/calculators/{name}", status=status,
                  calc=calc, specs=specs, values=values, body=body, body_text=pretty_json(body) if body is not None else
                  request.query_params.get("body", ""), given=given, e=envelope, problem=problem,
                  outputs=flatten_outputs(envelope["outputs"]) if envelope else [], charts=chart_list,
                  cases=case_refs(store, calc.cases), permalink=permalink,
                  example_url=explanation_url(name, calc.example),
                  derivations=[d for d in store.all("derivation") if d.get("calculator") == name],
                  sources=[s["source"] for s in (envelope or {}).get("inputs", {}).get("sources", []) if s.get("source")])


# =========================================================================== pages: search, coverage, claims, glossary

@router.get("/search", response_class=HTMLResponse)
def search_page(request: Request):
    try:
        q = q_str(request, "q", 500)
        limit = q_int(request, "limit", 20, 1, 1000)
        offset = q_int(request, "offset", 0, 0, 1_000_000)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    kinds = [k for k in request.query_params.getlist("kind") if k]
    hits, total = ([], 0)
    index = getattr(request.app.state, "search_index", None)
    if q and index is not None:
        hits, total = index.search(q, set(kinds) or None, limit, offset)
    page = StorePage(hits, total, limit, offset)
    return render(request, "search.html.j2", title=f"Search: {q}" if q else "Search",
                  twin=twin_url(request, "/api/v1/search") if q else None, q=q or "", hits=hits, total=total,
                  pager=pager(request, page), kinds=kinds,
                  all_kinds=("case", "model", "hardware", "link", "framework", "derivation", "glossary", "claim"))


@router.get("/coverage", response_class=HTMLResponse)
def coverage_page(request: Request):
    store = store_of(request)
    cov = coverage(store.all("case"), store.all("derivation"))
    return render(request, "coverage.html.j2", title="Coverage", twin="/api/v1/coverage", cov=cov,
                  registered=sorted(REGISTRY))


def _recompute_url(rec: dict) -> str | None:
    """The calculator page recomputing a stored request (None when its calculator is not registered)."""
    calc = REGISTRY.get(rec.get("calculator") or "")
    return explanation_url(calc.name, rec["request"]) if calc and isinstance(rec.get("request"), dict) else None


def _source_ref(store: Store, sid: Any) -> dict | None:
    if not isinstance(sid, str):
        return None
    src = store.get("source", sid) or {}
    return {"id": sid, "title": src.get("title", sid), "url": src.get("url"), "date": src.get("date"),
            "publisher": src.get("publisher")}


@router.get("/claims", response_class=HTMLResponse)
def claims_page(request: Request):
    store = store_of(request)
    try:
        verdict = q_str(request, "verdict", 100)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    claims = []
    for c in store.all("claim"):
        if verdict and str(c.get("verdict", "")).lower() != verdict.lower():
            continue
        c = dict(c)
        c["recompute_url"] = _recompute_url(c)
        c["alternatives"] = [{**a, "recompute_url": _recompute_url(a)} for a in c.get("alternatives") or []
                             if isinstance(a, dict)]
        claims.append(c)
    return render(request, "claims.html.j2", title="Audited claims", twin=twin_url(request), claims=claims,
                  verdicts=distinct(store, "claim", "verdict"), verdict=verdict or "", sources=cited_sources(claims))


@router.get("/glossary", response_class=HTMLResponse)
def glossary_page(request: Request):
    store = store_of(request)
    try:
        kind = q_str(request, "kind", 100)
    except BadQuery as exc:
        return bad_query_page(request, exc)
    entries = []
    for g in store.all("glossary"):
        if kind and str(g.get("kind", "")).lower() != kind.lower():
            continue
        g = dict(g)
        papers = [g.get("paper")] + list(g.get("also_papers") or [])
        g["paper_refs"] = [r for r in (_source_ref(store, p) for p in papers) if r]
        g["seen_in_ref"] = _source_ref(store, g.get("seen_in"))
        g["calculators"] = [c for c in g.get("related_calculators") or [] if c in REGISTRY]
        entries.append(g)
    return render(request, "glossary.html.j2", title="Glossary", twin=twin_url(request), entries=entries,
                  kinds=distinct(store, "glossary", "kind"), kind=kind or "", sources=cited_sources(entries))


@router.get("/claims/{claim_id}", response_class=HTMLResponse)
def claim_detail(request: Request, claim_id: str):
    if store_of(request).get("claim", claim_id) is None:
        raise NotFound("claim", claim_id, "/api/v1/claims")
    return RedirectResponse(f"/claims#{claim_id}", status_code=303)


@router.get("/glossary/{entry_id}", response_class=HTMLResponse)
def glossary_detail(request: Request, entry_id: str):
    if store_of(request).get("glossary", entry_id) is None:
        raise NotFound("glossary", entry_id, "/api/v1/glossary")
    return RedirectResponse(f"/glossary#{entry_id}", status_code=303)


# =========================================================================== mounting

def render_not_found(request: Request, exc: NotFound | None) -> HTMLResponse:
    if exc is not None:
        detail = f"There is no {exc.kind} with id “{exc.ident}”."
        html_list = exc.list_endpoint.replace("/api/v1", "", 1) or "/"
        back, twin = html_list, exc.list_endpoint
    else:
        detail = f"No page at {request.url.path}."
        back, twin = "/", None
    try:
        return render(request, "not_found.html.j2", title="Not found", twin=twin, status=404, detail=detail, back=back)
    except Exception:  # the store may be closed while shutting down; a plain page still answers 404
        log.exception("404 page could not be rendered")
        return HTMLResponse(f"<!doctype html><title>Not found</title><h1>Not found</h1><p>{escape(detail)}</p>",
                            status_code=404)


def mount(app: FastAPI) -> None:
    """Add the HTML pages, /static and the HTML 404 page to the app."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.state.render_not_found = render_not_found
