"""The search page: the form, and ranked hits for `q` over cases, calculators, facts and glossary, English or
Chinese (the JSON twin answers the same query)."""
from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request
from starlette.responses import HTMLResponse

from api.queries import Kind, SearchPageQuery
from api.site.render import page_router, pager, render, twin
from knowledge.store import Page

router = page_router()


@router.get("/search", response_class=HTMLResponse)
def search_page(request: Request, query: Annotated[SearchPageQuery, Query()]) -> HTMLResponse:
    """The search form, and the hits for `q` (none without it)."""
    hits, total = query.run_search(getattr(request.app.state, "search_index", None))
    page = Page(hits, total, query.limit, query.offset)
    return render(request, "search.html.j2", title=f"Search: {query.q}" if query.q else "Search",
                  twin=twin(request) if query.q else None, q=query.q or "", hits=hits, total=total,
                  pager=pager(request, page), kinds=sorted(query.kinds() or ()), all_kinds=tuple(k.value for k in Kind))
