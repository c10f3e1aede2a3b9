"""Sourced facts: hardware, models, frameworks, links, prices and sources, as lists and detail pages.

Every list reads its query with the model its JSON twin uses (`api.queries`) and runs it the same
way, so `/hardware?vendor=NVIDIA&sort=power_w` and `/api/v1/hardware?vendor=NVIDIA&sort=power_w`
list the same records.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from fastapi import Query, Request
from starlette.responses import HTMLResponse, RedirectResponse

from api.queries import (
    FrameworkQuery,
    HardwareQuery,
    HardwareSort,
    LinkQuery,
    ModelQuery,
    ModelSort,
    PriceQuery,
    SourceQuery,
)
from api.price_marks import mark_prices
from api.routes.common import NotFound
from api.service import CalculationFailed, calculate
from calculators.domain import HARDWARE_KINDS, PRICE_STALE_MONTHS, AmbiguousModelId, price_as_of, resolve_model_id
from calculators.framework import UnknownId, jsonable
from api.site.format import cited_sources, iter_facts
from api.site.render import (
    distinct,
    page_router,
    pager,
    render,
    sort_links,
    store_of,
    twin,
)
from api.urls import urls
from calculators.framework.registry import REGISTRY
from knowledge.store import Store

router = page_router()

PRICE_COLUMNS = ("input_usd_per_mtok", "cache_read_usd_per_mtok", "cache_write_usd_per_mtok", "output_usd_per_mtok")


def _record(store: Store, kind: str, ident: str) -> dict[str, Any]:
    """A stored record, or the 404 page naming the JSON list to look in."""
    rec = store.get(kind, ident)
    if rec is None:
        raise NotFound(kind, ident, urls.api_list(kind))
    return rec


def _cases_using(store: Store, key: str, ident: str) -> list[dict]:
    """Cases whose `uses[key]` lists this record."""
    return [c for c in store.all("case") if ident in ((c.get("uses") or {}).get(key) or [])]


def _options(store: Store, kind: str, fields: list[str] | tuple[str, ...]) -> dict[str, list[str]]:
    return {f: distinct(store, kind, f) for f in fields}


# --------------------------------------------------------------------------- hardware

def _bf16_dense(hw: dict[str, Any]) -> dict | None:
    """The dense BF16 peak of a device (the list's comparison column)."""
    return next((p.get("flop_per_s") for p in hw.get("peaks") or []
                 if str(p.get("input_precision")).upper() == "BF16" and p.get("sparsity") == "dense"), None)


def _facet_links(request: Request, store: Store, query: HardwareQuery, name: str,
                 labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The filter links of one facet (`kind` or `vendor`): per value, the records the other filters keep with it and
    the URL that selects it (or drops it when it is the current one); values kept by no record are left out."""
    others = query.model_copy(update={name: None, "limit": 1_000_000, "offset": 0}).run(store).items
    counts: dict[str, int] = {}
    for h in others:
        value = h.get(name)
        if value not in (None, ""):
            counts[str(value)] = counts.get(str(value), 0) + 1
    current = query.filters()[name]
    order = list(labels) if labels else sorted(counts, key=str.lower)
    return [{"value": v, "label": (labels or {}).get(v, v), "count": counts[v],
             "active": v.lower() == str(current).lower(),
             "url": urls.with_changes(request.url.path, request.query_params.multi_items(),
                                      **{name: None if v.lower() == str(current).lower() else v}, offset=None)}
            for v in order if counts.get(v)]


@router.get("/hardware", response_class=HTMLResponse)
def hardware_page(request: Request, query: Annotated[HardwareQuery, Query()]) -> HTMLResponse:
    """Accelerators and systems, filtered and sorted like /api/v1/hardware, with kind and vendor filter links."""
    store = store_of(request)
    page = query.run(store)
    facets = {"kind": _facet_links(request, store, query, "kind", HARDWARE_KINDS),
              "vendor": _facet_links(request, store, query, "vendor")}
    return render(request, "hardware_list.html.j2", title="Hardware", twin=twin(request), page=page,
                  bf16={h["id"]: _bf16_dense(h) for h in page.items}, pager=pager(request, page),
                  sorts=sort_links(request, query, HardwareSort), filters=query.filters(), facets=facets,
                  kinds=HARDWARE_KINDS, options=_options(store, "hardware", tuple(query.exact)),
                  sources=cited_sources(page.items))


@router.get("/hardware/{hardware_id}", response_class=HTMLResponse)
def hardware_detail(request: Request, hardware_id: str) -> HTMLResponse:
    """One device: memory, bandwidth, power, peaks, every sourced number."""
    store = store_of(request)
    hw = _record(store, "hardware", hardware_id)
    links = [{"id": i, "name": (store.get("link", i) or {}).get("name", i)} for i in hw.get("links") or []]
    return render(request, "hardware.html.j2", title=hw["name"], twin=urls.api_item("hardware", hardware_id), hw=hw,
                  links=links, cases=_cases_using(store, "hardware", hardware_id), facts=list(iter_facts(hw)),
                  sources=cited_sources(hw))


# --------------------------------------------------------------------------- models

@router.get("/models", response_class=HTMLResponse)
def models_page(request: Request, query: Annotated[ModelQuery, Query()]) -> HTMLResponse:
    """Model architectures, filtered and sorted like /api/v1/models."""
    store = store_of(request)
    page = query.run(store)
    return render(request, "models_list.html.j2", title="Models", twin=twin(request), page=page,
                  pager=pager(request, page), sorts=sort_links(request, query, ModelSort), filters=query.filters(),
                  options=_options(store, "model", tuple(query.exact)), sources=cited_sources(page.items))


def _live(name: str, body: dict[str, Any], store: Store, keys: tuple[str, ...]) -> dict[str, Any]:
    """A calculator's answer for a fact page, degrading to a note when it is absent or refuses."""
    if name not in REGISTRY:
        return {"name": name, "available": False, "note": f"the {name} calculator is not registered yet"}
    try:
        env = jsonable(calculate(name, body, store))   # the page reads plain values
    except CalculationFailed as exc:
        # link the empty form, not the refused request (which would answer 422)
        return {"name": name, "available": False, "note": exc.body.get("detail", "could not compute"),
                "url": urls.calculator(name)}
    values = [(k, env["outputs"].get(k)) for k in keys if env["outputs"].get(k) is not None]
    return {"name": name, "available": True, "values": values, "url": env["explanation_url"], "title": REGISTRY[name].title}


def _canonical_model(request: Request, store: Store, name: str) -> RedirectResponse:
    """A model named other than by its id (a case variant, a Hugging Face repository, without -Instruct): 308 to
    `/models/{id}`, read as calculators read `model`; a name that reads as several models or none is the 404 page."""
    try:
        mid, _ = resolve_model_id(store.lookup, name, "model_id")
    except (AmbiguousModelId, UnknownId):
        raise NotFound("model", name, urls.api_list("model")) from None
    target = urls.model(mid) + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(target, status_code=308)


@router.get("/models/{owner}/{model_id}", response_class=HTMLResponse)
def model_by_repository(request: Request, owner: str, model_id: str) -> RedirectResponse:
    """A model by its Hugging Face repository (`/models/meta-llama/Llama-3.1-8B-Instruct`): 308 to its page."""
    return _canonical_model(request, store_of(request), f"{owner}/{model_id}")


@router.get("/models/{model_id}", response_class=HTMLResponse)
def model_detail(request: Request, model_id: str) -> HTMLResponse:
    """One model: its shape, layer groups, sources, and KV and weight bytes computed live."""
    store = store_of(request)
    if store.get("model", model_id) is None:
        return _canonical_model(request, store, model_id)
    m = _record(store, "model", model_id)
    live = [
        _live("kv-cache", {"model": model_id, "tokens": 8192}, store,
              ("values_per_token", "bytes_per_token", "bytes_per_request", "state_bytes")),
        _live("weight-memory", {"model": model_id}, store, ("params_total", "params_active", "bytes_total", "bits_per_param")),
    ]
    return render(request, "model.html.j2", title=m["name"], twin=urls.api_item("model", model_id), model=m, live=live,
                  cases=_cases_using(store, "models", model_id), facts=list(iter_facts(m)), sources=cited_sources(m))


# --------------------------------------------------------------------------- frameworks, links, prices

@router.get("/frameworks", response_class=HTMLResponse)
def frameworks_page(request: Request, query: Annotated[FrameworkQuery, Query()]) -> HTMLResponse:
    """Frameworks, filtered like /api/v1/frameworks."""
    store = store_of(request)
    page = query.run(store)
    return render(request, "frameworks_list.html.j2", title="Frameworks", twin=twin(request), page=page,
                  pager=pager(request, page), filters=query.filters(), options=_options(store, "framework", ["kind"]),
                  sources=cited_sources(page.items))


@router.get("/frameworks/{framework_id}", response_class=HTMLResponse)
def framework_detail(request: Request, framework_id: str) -> HTMLResponse:
    """One framework with its dated feature rows."""
    store = store_of(request)
    fw = _record(store, "framework", framework_id)
    return render(request, "framework.html.j2", title=fw["name"], twin=urls.api_item("framework", framework_id), fw=fw,
                  cases=_cases_using(store, "frameworks", framework_id), sources=cited_sources(fw))


@router.get("/links", response_class=HTMLResponse)
def links_page(request: Request, query: Annotated[LinkQuery, Query()]) -> HTMLResponse:
    """Interconnects, filtered like /api/v1/links."""
    store = store_of(request)
    page = query.run(store)
    return render(request, "links.html.j2", title="Interconnects", twin=twin(request), page=page,
                  pager=pager(request, page), filters=query.filters(), options=_options(store, "link", ["kind"]),
                  sources=cited_sources(page.items))


@router.get("/links/{link_id}", response_class=HTMLResponse)
def link_detail(request: Request, link_id: str) -> RedirectResponse:
    """Links have no page of their own: their row on the list."""
    _record(store_of(request), "link", link_id)
    return RedirectResponse(urls.link(link_id), status_code=303)


@router.get("/prices", response_class=HTMLResponse)
def prices_page(request: Request, query: Annotated[PriceQuery, Query()]) -> HTMLResponse:
    """Dated prices, filtered like /api/v1/prices."""
    store = store_of(request)
    page = query.run(store)
    page = replace(page, items=mark_prices(store, page.items))
    return render(request, "prices.html.j2", title="Prices", twin=twin(request), page=page, as_of=price_as_of(),
                  stale_months=PRICE_STALE_MONTHS,
                  pager=pager(request, page), filters=query.filters(), options=_options(store, "price", ["provider"]),
                  columns=PRICE_COLUMNS, sources=cited_sources(page.items))


# --------------------------------------------------------------------------- sources

@router.get("/sources", response_class=HTMLResponse)
def sources_page(request: Request, query: Annotated[SourceQuery, Query()]) -> HTMLResponse:
    """Sources, filtered like /api/v1/sources."""
    store = store_of(request)
    page = query.run(store)
    return render(request, "sources_list.html.j2", title="Sources", twin=twin(request), page=page,
                  pager=pager(request, page), filters=query.filters(),
                  options=_options(store, "source", ["kind", "publisher"]))


def _also_cited_by(store: Store, source_id: str) -> list[dict[str, Any]]:
    """Citations outside the fact table: framework feature rows and model layer-group provenance."""
    also = []
    for fw in store.all("framework"):
        for feat in fw.get("features") or []:
            if feat.get("source") == source_id:
                also.append({"what": f"{fw['name']}: {feat.get('name') or feat.get('feature')}",
                             "url": urls.framework(fw["id"]), "locator": feat.get("locator")})
    for m in store.all("model"):
        prov = m.get("layer_groups_provenance") or {}
        if prov.get("source") == source_id:
            also.append({"what": f"{m['name']}: layer groups", "url": urls.model(m["id"]), "locator": prov.get("locator")})
    return also


@router.get("/sources/{source_id}", response_class=HTMLResponse)
def source_detail(request: Request, source_id: str) -> HTMLResponse:
    """One source and every stored number that cites it."""
    store = store_of(request)
    src = _record(store, "source", source_id)
    facts = store.facts_from_source(source_id)
    for f in facts:
        rec = store.get(f["kind"], f["record_id"]) or {}
        f["url"] = urls.record(f["kind"], f["record_id"])
        f["name"] = rec.get("name", f["record_id"])
    return render(request, "source.html.j2", title=src.get("title", source_id), twin=urls.api_item("source", source_id),
                  src=src, facts=facts, also=_also_cited_by(store, source_id), sources=[source_id])
