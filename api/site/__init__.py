"""The HTML explainer site: GET pages over the store and the calculators, without JavaScript.

Every page is a thin view: it reads the store (or calls `api.service.calculate`) and hands plain
data to one Jinja template under `api/templates/`. List pages parse their query with the models their
JSON twins use (`api.queries`); every URL comes from `api.urls.urls` (also the templates' `urls`).
Each page links its JSON twin under /api/v1.

Modules, one per family of pages: `home`, `cases`, `facts` (hardware, models, frameworks, links,
prices, sources), `calculators` (with `forms` for the GET forms and `charts`/`chart_layout` for the
SVG charts), `search`, `pages` (coverage, claims, glossary), `measurements` (measured kernel
tables), `calibration` (measured estimate vs bound), `benchmarks` (published serving measurements), `validation`
(the serving estimate against them);
`render` holds what they share and `format` the number formatting.

`mount(app)` adds the routes, the static files and `app.state.render_not_found` (the app's 404
handlers call it for unknown ids and paths outside the API).
"""
from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.staticfiles import StaticFiles
from markupsafe import escape
from starlette.responses import HTMLResponse

from api.routes.common import NotFound
from api.site import benchmarks, calculators, calibration, cases, facts, home, measurements, pages, search, validation
from api.site import downloads
from api.site.render import STATIC, log, render
from api.urls import urls
from calculators.framework.registry import REGISTRY  # noqa: F401  (tests and tools patch the registry through here)

router = APIRouter(include_in_schema=False)
for _module in (home, cases, facts, calculators, search, pages, measurements, calibration, benchmarks, validation):
    router.include_router(_module.router)
router.include_router(downloads.router)  # /downloads


def render_not_found(request: Request, exc: NotFound | None) -> HTMLResponse:
    """The HTML 404 page: for an unknown id, a link to its list and the JSON list as twin."""
    suggestions: list[dict] = []
    if exc is not None:
        detail = f"There is no {exc.kind} with id “{exc.ident}”."
        back, twin = urls.page_of(exc.list_endpoint), exc.list_endpoint
        found = getattr(exc, "suggestions_found", None) or []
        page = (lambda i: urls.calculator(i)) if exc.kind == "calculator" else (lambda i: urls.record(exc.kind, i))
        suggestions = [{"id": i, "url": page(i)} for i in found]
    else:
        detail = f"No page at {request.url.path}."
        back, twin = urls.home(), None
    try:
        return render(request, "not_found.html.j2", title="Not found", twin=twin, status=404, detail=detail, back=back,
                      suggestions=suggestions)
    except Exception:  # the store may be closed while shutting down; a plain page still answers 404
        log.exception("404 page could not be rendered")
        return HTMLResponse(f"<!doctype html><title>Not found</title><h1>Not found</h1><p>{escape(detail)}</p>",
                            status_code=404)


def mount(app: FastAPI) -> None:
    """Add the HTML pages, /static and the HTML 404 page to the app."""
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.state.render_not_found = render_not_found
