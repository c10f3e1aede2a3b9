"""The cases of the book: the filtered list and one case with its worked examples."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from starlette.responses import HTMLResponse

from api.queries import CaseQuery
from api.routes.common import NotFound
from api.service import case_refs
from api.site.render import page_router, pager, render, store_of, twin
from api.urls import urls
from calculators.framework.registry import REGISTRY
from knowledge.store import Store

router = page_router()

#: `uses` keys of a case -> record kinds
USES_KINDS = {"models": "model", "hardware": "hardware", "links": "link", "frameworks": "framework"}


def recompute_url(rec: dict[str, Any]) -> str | None:
    """The calculator page recomputing a stored request (None when its calculator is not registered)."""
    calc = REGISTRY.get(rec.get("calculator") or "")
    return urls.calculator(calc.name, rec["request"]) if calc and isinstance(rec.get("request"), dict) else None


@router.get("/cases", response_class=HTMLResponse)
def cases_page(request: Request, query: Annotated[CaseQuery, Query()]) -> HTMLResponse:
    """The cases, filtered like /api/v1/cases, with how many worked examples each has bound."""
    store = store_of(request)
    page = query.run(store)
    per_case = {row["slug"]: row for row in store.coverage["per_case"]}   # audited once per open store
    sections = sorted({(c.get("section_order") or 99, c.get("section") or "") for c in store.all("case")})
    chapters = sorted({ch for c in store.all("case") for ch in c.get("cited_chapters") or []})
    return render(request, "cases.html.j2", title="Cases", twin=twin(request), page=page, pager=pager(request, page),
                  per_case=per_case, sections=sections, chapters=chapters, filters=query.filters())


def _uses(store: Store, case: dict[str, Any]) -> list[dict[str, Any]]:
    """The facts a case uses, grouped by kind, each linked to its page (unknown ids kept, marked)."""
    out = []
    for key, ids in (case.get("uses") or {}).items():
        kind = USES_KINDS.get(key, key)
        items = []
        for ident in ids or []:
            rec = store.get(kind, ident)
            items.append({"id": ident, "name": (rec or {}).get("name", ident), "url": urls.record(kind, ident),
                          "known": rec is not None})
        out.append({"kind": key, "items": items})
    return out


@router.get("/cases/{slug}", response_class=HTMLResponse)
def case_page(request: Request, slug: str) -> HTMLResponse:
    """One case: its worked examples (with recompute links), calculators, facts used and related cases."""
    store = store_of(request)
    case = store.get("case", slug)
    if case is None:
        raise NotFound("case", slug, urls.api_list("case"))
    derivations = []
    for d in store.derivations_of(slug):
        calc = REGISTRY.get(d.get("calculator") or "")
        derivations.append({**d, "recompute_url": recompute_url(d), "calculator_title": calc.title if calc else None})
    calcs = [c for c in REGISTRY.values() if slug in c.cases]
    return render(request, "case.html.j2", title=f"{case['title_zh']} — {case['title_en']}",
                  twin=urls.api_item("case", slug), case=case, derivations=derivations, uses=_uses(store, case),
                  related=case_refs(store, case.get("related") or []), calculators=calcs,
                  bound=sum(1 for d in derivations if d.get("calculator")))
