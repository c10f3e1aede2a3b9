"""What every page shares: the Jinja environment, `render`, the page route class, paging and sort links.

Pages read their query through the same models as the JSON routes (`api.queries`); `PageRoute`
answers an invalid query with the HTML problem page (422) instead of problem+json, naming the
fields exactly as the JSON route would.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from enum import Enum
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.responses import HTMLResponse, Response

from api.problems import pydantic_errors
from api.queries import ListQuery
from api.site import chart_layout
from api.site.format import (
    compact_json,
    human,
    human_bytes,
    is_fact,
    iter_facts,
    pretty_json,
    raw,
    show,
    step_reading,
    unit_key,
)
from api.urls import urls
from calculators.framework import fmt_s, num
from knowledge.store import Page, Store

log = logging.getLogger("casebook.site")

#: package data of `api` (api/templates, api/static), so an installed wheel has them too
TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
STATIC = Path(__file__).resolve().parents[1] / "static"
BOOK_REPO = "https://github.com/bojieli/ai-infra-book"

#: the site's navigation: (URL, label)
NAV: list[tuple[str, str]] = [
    (urls.home(), "Home"), (urls.cases(), "Cases"), (urls.calculators(), "Calculators"), (urls.models(), "Models"),
    (urls.hardware_list(), "Hardware"), (urls.links(), "Links"), (urls.frameworks(), "Frameworks"),
    (urls.prices(), "Prices"), (urls.measurements(), "Measurements"), (urls.benchmarks(), "Benchmarks"),
    (urls.validation(), "Validation"), (urls.calibration(), "Calibration"),
    (urls.sources(), "Sources"),
    (urls.coverage(), "Coverage"), (urls.claims(), "Claims"), (urls.glossary(), "Glossary")]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _env() -> Environment:
    """Templates autoescaped and strict (an undefined name is an error, not an empty string)."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=select_autoescape(("html", "j2")),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      auto_reload=False)   # templates do not change under a running server: no stat() per render
    env.filters.update(num=lambda v, d=6: num(v, d) if _is_number(v) else show(v),
                       human=human, show=show, raw=raw, pretty=pretty_json, compact=compact_json, bytes=human_bytes,
                       seconds=fmt_s)
    env.globals.update(urls=urls, reading=human, unit_key=unit_key, step_reading=step_reading, is_fact=is_fact,
                       iter_facts=iter_facts, layout=chart_layout.layout, chart_table=chart_layout.table_rows,
                       isnumber=_is_number)
    return env


ENV = _env()


def store_of(request: Request) -> Store:
    """The store the app opened at start-up."""
    return request.app.state.store


def render(request: Request, template: str, *, title: str, twin: str | None, status: int = 200,
           sources: list[str] | None = None, **ctx: Any) -> HTMLResponse:
    """A page: `template` with the layout's context (navigation, JSON twin, sources cited, store identity)."""
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


def twin(request: Request) -> str:
    """The /api/v1 URL answering the same question as this page, with the same parameters."""
    return urls.json_twin(request.url.path, request.query_params.multi_items())


# --------------------------------------------------------------------------- invalid queries

def problem_page(request: Request, problem: dict[str, Any]) -> HTMLResponse:
    """The HTML problem page (the JSON twin answers the same request with this problem as JSON)."""
    return render(request, "error.html.j2", title=problem["title"], twin=None, status=problem["status"],
                  problem=problem, back=request.url.path)


def invalid_query_page(request: Request, exc: RequestValidationError) -> HTMLResponse:
    """A 422 page naming the query fields that failed, as the JSON route's problem does."""
    errors = pydantic_errors(exc.errors())
    fields = ", ".join(sorted({e["field"] for e in errors}))
    return problem_page(request, {"title": "Invalid request", "status": 422,
                                  "detail": f"invalid field(s): {fields}", "errors": errors})


class PageRoute(APIRoute):
    """A site route: query validation errors become the HTML 422 page, not problem+json."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return invalid_query_page(request, exc)

        return page_handler


def page_router() -> APIRouter:
    """A router for site pages: hidden from OpenAPI, HTML errors for bad queries."""
    return APIRouter(include_in_schema=False, route_class=PageRoute)


# --------------------------------------------------------------------------- lists

def pager(request: Request, page: Page) -> dict[str, Any]:
    """Where this page of a list is, with links to the previous and next pages (same filters)."""
    def link(offset: int) -> str:
        return urls.with_changes(request.url.path, request.query_params.multi_items(), offset=offset, limit=page.limit)

    prev_off = max(page.offset - page.limit, 0)
    return {"total": page.total, "limit": page.limit, "offset": page.offset, "shown": len(page.items),
            "prev": link(prev_off) if page.offset > 0 else None,
            "next": link(page.offset + page.limit) if page.offset + page.limit < page.total else None}


def sort_links(request: Request, query: ListQuery, columns: type[Enum]) -> dict[str, dict[str, Any]]:
    """Per sortable column: the URL sorting by it (toggling the direction when already sorted)."""
    current, desc = query.sort_column()
    out = {}
    for c in (m.value for m in columns):
        active = c == current
        out[c] = {"url": urls.with_changes(request.url.path, request.query_params.multi_items(), sort=c,
                                           desc="true" if active and not desc else None, offset=None),
                  "active": active, "desc": desc if active else None}
    return out


def distinct(store: Store, kind: str, field: str) -> list[str]:
    """The values a field takes across a kind (options of a filter's select)."""
    return sorted({str(r[field]) for r in store.all(kind) if r.get(field) not in (None, "")}, key=str.lower)
