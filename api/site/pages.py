"""Book-wide pages: coverage of the book's arithmetic, audited claims, and the glossary.

Claims and glossary read their query (filter, limit, offset) with the models of their JSON twins.
"""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from starlette.responses import HTMLResponse, RedirectResponse

from api.queries import ClaimQuery, GlossaryQuery
from api.routes.common import NotFound
from api.site.cases import recompute_url
from api.site.format import cited_sources
from api.site.render import distinct, page_router, pager, render, store_of, twin
from api.urls import urls
from calculators.framework.registry import REGISTRY
from knowledge.records.book import Claim
from knowledge.store import Store

router = page_router()


@router.get("/coverage", response_class=HTMLResponse)
def coverage_page(request: Request) -> HTMLResponse:
    """How many of the book's worked examples a calculator recomputes and how many printed numbers a check reads,
    by family and by case, with the reason of each unbound example."""
    store = store_of(request)
    cov = store.coverage
    return render(request, "coverage.html.j2", title="Coverage", twin=urls.api_coverage(), cov=cov,
                  registered=sorted(REGISTRY))


def _source_ref(store: Store, sid: Any) -> dict[str, Any] | None:
    """A cited source for a glossary entry (title, link, publisher, date)."""
    if not isinstance(sid, str):
        return None
    src = store.get("source", sid) or {}
    return {"id": sid, "title": src.get("title", sid), "url": src.get("url"), "date": src.get("date"),
            "publisher": src.get("publisher")}


@router.get("/claims", response_class=HTMLResponse)
def claims_page(request: Request, query: Annotated[ClaimQuery, Query()]) -> HTMLResponse:
    """Audited claims, each with the page's numbers against ours (and the ratio) and a link recomputing it live."""
    store = store_of(request)
    page = query.run(store)
    claims = []
    for c in page.items:
        alternatives = [{**a, "recompute_url": recompute_url(a)} for a in c.get("alternatives") or [] if isinstance(a, dict)]
        claims.append({**c, "recompute_url": recompute_url(c), "alternatives": alternatives,
                       "page_numbers": Claim.compared(c)})
    return render(request, "claims.html.j2", title="Audited claims", twin=twin(request), claims=claims,
                  pager=pager(request, page), verdicts=distinct(store, "claim", "verdict"), verdict=query.verdict or "",
                  sources=cited_sources(claims))


@router.get("/glossary", response_class=HTMLResponse)
def glossary_page(request: Request, query: Annotated[GlossaryQuery, Query()]) -> HTMLResponse:
    """Methods and terms with their papers and the calculators that use them."""
    store = store_of(request)
    page = query.run(store)
    entries = []
    for g in page.items:
        papers = [g.get("paper")] + list(g.get("also_papers") or [])
        entries.append({**g, "paper_refs": [r for r in (_source_ref(store, p) for p in papers) if r],
                        "seen_in_ref": _source_ref(store, g.get("seen_in")),
                        "calculators": [c for c in g.get("related_calculators") or [] if c in REGISTRY]})
    return render(request, "glossary.html.j2", title="Glossary", twin=twin(request), entries=entries,
                  pager=pager(request, page), kinds=distinct(store, "glossary", "kind"), kind=query.kind or "",
                  sources=cited_sources(entries))


@router.get("/claims/{claim_id}", response_class=HTMLResponse)
def claim_detail(request: Request, claim_id: str) -> RedirectResponse:
    """Claims have no page of their own: their article on the list."""
    if store_of(request).get("claim", claim_id) is None:
        raise NotFound("claim", claim_id, urls.api_list("claim"))
    return RedirectResponse(urls.claim(claim_id), status_code=303)


@router.get("/glossary/{entry_id}", response_class=HTMLResponse)
def glossary_detail(request: Request, entry_id: str) -> RedirectResponse:
    """Glossary entries have no page of their own: their entry on the list."""
    if store_of(request).get("glossary", entry_id) is None:
        raise NotFound("glossary", entry_id, urls.api_list("glossary"))
    return RedirectResponse(urls.glossary_entry(entry_id), status_code=303)
