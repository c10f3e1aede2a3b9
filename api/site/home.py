"""The home page: entry points, counts, and the book's cases by index section."""
from __future__ import annotations

from fastapi import Request
from starlette.responses import HTMLResponse

from api.site.render import page_router, render, store_of
from api.urls import urls
from calculators.framework.registry import REGISTRY

router = page_router()

#: record kinds counted on the home page
COUNTED = ("case", "derivation", "model", "hardware", "link", "framework", "price", "source", "claim", "glossary")


@router.get("/", response_class=HTMLResponse)
def home(request: Request) -> HTMLResponse:
    """Entry points, counts and the index of cases."""
    store = store_of(request)
    sections: dict[str, dict] = {}
    for c in store.all("case"):
        key = c.get("section") or "—"
        sec = sections.setdefault(key, {"section": key, "section_en": c.get("section_en"), "cases": []})
        sec["cases"].append(c)
    cov = store.coverage   # audited once per open store, not per request
    return render(request, "home.html.j2", title="AI Infra Casebook", twin=urls.api_list("case"),
                  sections=list(sections.values()), counts={k: store.count(k) for k in COUNTED},
                  calculators=list(REGISTRY.values()), cov=cov)
