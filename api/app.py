"""The ASGI application: JSON API under /api/v1, the HTML site, health, problem+json errors."""
from __future__ import annotations

import gc
import logging
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import PlainTextResponse

from api import schemas as S
from api.docs import mount as mount_docs
from api.llms import llms_txt
from api.middleware import (BodyLimitMiddleware, HeadMiddleware, McpGuard, PlainErrorsMiddleware,
                            SecurityHeadersMiddleware, allowed_methods, relative_slash_redirects)
from api.problems import omitted_text, problem, problem_responses, pydantic_errors
from api.routes import benchmarks, calculators, calibration, cases, facts, measurements, search, validation
from api.routes.common import NotFound
from api.routes import export as export_routes
from api.settings import Settings, get_settings
from knowledge.build import STALE_REASON_ENV, ensure_servable
from knowledge.search import build_index
from knowledge.store import Store, StoreUnavailable

log = logging.getLogger("casebook")

DESCRIPTION = """
Sourced facts about AI infrastructure (accelerators, links, model architectures, frameworks,
prices), the worked examples of the 71 case studies of *深入理解 AI Infra：量化分析与系统设计*,
and calculators that show their work.

Conventions: SI base units with the unit in the field name (`_bytes`, `_bytes_per_s`, `_s`,
`_flop_per_s`); decimal GB (1e9) and binary GiB (2^30) are never mixed silently. Every numeric
fact carries `source` and `locator`. Errors are RFC 9457 `application/problem+json` with
field-level `errors`. Lists take `limit`/`offset` and return `total`.
"""


def open_store(settings: Settings) -> Store:
    """The store to serve, built first when allowed and needed. When the data files do not build but the store
    that is there is sound (only older than they are), that one is served and `store_stale_reason` says why
    (so does `casebook serve`, which passes its reason on in CASEBOOK_STORE_STALE_REASON)."""
    stale = os.environ.get(STALE_REASON_ENV) or None
    if settings.build_if_stale:
        stale = ensure_servable(settings.db_path) or stale
        if stale:
            log.warning("serving an older store than the data files: %s", stale)
    store = Store(settings.db_path)
    store.stale_reason = stale
    return store


def _warm_validation(store: Store) -> None:
    """Start computing the store's validation report on a daemon thread (its persisted copy is read when there is
    one): serving-estimate's calibration factors and the planner's class errors come from it, and the first request
    that needs them would otherwise wait for the whole report. A failure is logged by the report's own readers."""
    import threading

    from knowledge.validation import cached_report

    def work() -> None:
        try:
            cached_report(store)
        except Exception as exc:      # noqa: BLE001 - the first request that needs it computes it again, or logs
            log.warning("validation report not warmed (%s: %s)", type(exc).__name__, exc)

    threading.Thread(target=work, name="casebook-validation-warm", daemon=True).start()


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # Re-entrant: a second lifespan on the same app (several test clients) reuses what the
        # first opened and closes nothing it did not open.
        opened = getattr(app.state, "store", None) is None
        if opened:
            app.state.store = open_store(settings)
            app.state.search_index = build_index(app.state.store)
            if settings.warm_validation:
                _warm_validation(app.state.store)
            # Everything built so far lives as long as the worker: move it out of the collector's reach, so
            # that a full collection under load walks only what requests allocate (shorter pauses, p99)
            gc.collect()
            gc.freeze()
        async with _mcp_lifespan(app):
            yield
        if opened:
            app.state.store.close()
            app.state.store = None

    app = FastAPI(
        title="AI Infra Casebook", version=settings.version, description=DESCRIPTION, lifespan=lifespan,
        generate_unique_id_function=lambda route: route.name,
        responses=problem_responses(),  # every operation declares its errors as the Problem schema
        docs_url=None, redoc_url=None,  # api.docs serves both, offline
        openapi_tags=[{"name": "calculators", "description": "Calculators that show their work."},
                      {"name": "facts", "description": "Sourced facts: hardware, links, models, frameworks, prices, sources."},
                      {"name": "cases", "description": "The book's case studies and their worked examples."},
                      {"name": "search", "description": "Search across everything."},
                      {"name": "measurements", "description": "Measured kernel tables (NVIDIA aiconfigurator-core, Apache-2.0)."},
                      {"name": "benchmarks", "description": "Published end-to-end serving measurements, each with its source."},
                      {"name": "meta", "description": "Health and service information."}],
    )
    app.state.settings = settings
    app.state.store = None
    app.add_middleware(HeadMiddleware)          # innermost: HEAD answered as GET where a route takes only GET
    app.add_middleware(PlainErrorsMiddleware)   # plain-text errors of the frameworks as problem+json
    from api.caching import CachingMiddleware
    app.add_middleware(CachingMiddleware)       # ETag by content hash, 304 on If-None-Match (GET/HEAD reads)
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"], allow_headers=["*"],
                       allow_credentials=False)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes,
                       timeout_s=getattr(settings, "body_timeout_s", None))
    _install_error_handlers(app)

    for module in (facts, cases, search, calculators, measurements, calibration, benchmarks, validation):
        app.include_router(module.router, prefix="/api/v1")
    app.include_router(export_routes.router, prefix="/api/v1")  # downloads: /api/v1/export
    mount_docs(app)

    @app.get("/healthz", response_model=S.Health, tags=["meta"], summary="Health and store identity",
             description="200 while the store reads (its file unchanged since it was opened, and a real query "
                         "answers): version, the store's content hash, record counts, and `store_stale_reason` "
                         "when an older store is served because the data files do not build. 503 (problem+json "
                         "with the reason) once the store cannot be read.",
             responses={503: {"model": S.Problem, "description": "The store cannot be read: the reason."}})
    def healthz(request: Request):
        store: Store = request.app.state.store
        failure = store.health()
        if failure:
            return problem(503, "Store unreadable", failure, kind="store-unavailable", instance=request.url.path,
                           content_hash=store.content_hash, version=settings.version)
        return {"status": "ok", "version": settings.version, "content_hash": store.content_hash,
                "built_at": store.meta.get("built_at"), "store_stale_reason": store.stale_reason,
                "counts": {k: store.count(k) for k in ("case", "derivation", "hardware", "link", "model",
                                                       "framework", "price", "source", "glossary", "claim")}}

    @app.get("/llms.txt", tags=["meta"], summary="The service described for language models",
             description="Plain text (llms.txt convention): what the service is, its endpoints and MCP tools.",
             response_class=PlainTextResponse)
    def llms(request: Request):
        store: Store = request.app.state.store
        return PlainTextResponse(llms_txt({k: store.count(k) for k in store.records}))

    _include_optional(app)
    _guard_mcp(app)
    relative_slash_redirects(app)   # `/x/` -> `/x` with a relative Location, never one built from Host
    _tidy_openapi(app)
    return app


def _tidy_openapi(app: FastAPI) -> None:
    """The OpenAPI document with errors as application/problem+json and named enums (see S.tidy_openapi)."""
    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = S.tidy_openapi(FastAPI.openapi(app))
        return app.openapi_schema

    app.openapi = openapi


def _include_optional(app: FastAPI) -> None:
    """The HTML site and MCP live in their own modules; mount them when present."""
    try:
        from api import site
    except ImportError as exc:  # pragma: no cover - only while the site is being written
        log.warning("site not mounted: %s", exc)
    else:
        site.mount(app)
    from api.mcp_lazy import mount_lazy
    mount_lazy(app)   # the MCP SDK (~30 MB per worker) is imported at the first /mcp request


def _guard_mcp(app: FastAPI) -> None:
    """Put the MCP guard (Host/Origin check, POST only) in front of /mcp, so that refused requests never load
    or reach the MCP SDK."""
    for route in app.router.routes:
        if getattr(route, "path", None) == "/mcp" and not isinstance(getattr(route, "app", None), McpGuard):
            route.app = McpGuard(route.app)


@asynccontextmanager
async def _mcp_lifespan(app: FastAPI):
    """Run the MCP session manager once per app (its manager cannot be started twice)."""
    runner = getattr(app.state, "mcp_lifespan", None)
    if runner is None or getattr(app.state, "mcp_running", False):
        yield
        return
    app.state.mcp_running = True
    try:
        async with runner():
            yield
    finally:
        app.state.mcp_running = False


def _is_html(request: Request) -> bool:
    return not request.url.path.startswith(("/api/", "/healthz", "/openapi", "/mcp", "/llms"))


def _body_model(request: Request):
    """The pydantic model of the body the matched route takes (None when it takes none)."""
    field = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(field, "field_info", None), "annotation", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError):
        raw = exc.errors()
        text = exc.body if isinstance(exc.body, (str, bytes)) else None
        errors = pydantic_errors(raw, model=_body_model(request), text=text)
        if any(e.get("type") == "json_invalid" for e in raw):
            syntax = next(e for e in errors if e["type"] == "json_invalid")
            return problem(422, "Malformed JSON", f"the body is not valid JSON: {syntax['message']}", kind="json-syntax",
                           errors=list(errors), instance=request.url.path)
        detail = "invalid field(s): " + "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        detail += omitted_text(errors.omitted)
        return problem(422, "Invalid request", detail, kind="validation", errors=list(errors), instance=request.url.path,
                       errors_omitted=errors.omitted or None)

    @app.exception_handler(NotFound)
    async def on_not_found(request: Request, exc: NotFound):
        store = getattr(request.app.state, "store", None)
        exc.suggestions_found = exc.suggestions(store)      # for the HTML page too
        if _is_html(request) and hasattr(app.state, "render_not_found"):
            return app.state.render_not_found(request, exc)
        return problem(404, f"Unknown {exc.kind}", exc.message(store, exc.suggestions_found), kind="not-found", instance=request.url.path,
                       see=exc.list_endpoint, suggestions=exc.suggestions_found or None)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 404 and _is_html(request) and hasattr(app.state, "render_not_found"):
            return app.state.render_not_found(request, None)
        title = {400: "Bad request", 404: "Not found", 405: "Method not allowed", 408: "Request timeout",
                 413: "Request too large"}.get(exc.status_code, "Error")
        detail = exc.detail if isinstance(exc.detail, str) else title
        if exc.status_code == 400 and exc.__cause__ is not None:  # FastAPI's "error parsing the body": say why
            detail = f"the request body could not be read: {type(exc.__cause__).__name__}: {exc.__cause__}".rstrip(": ")
        headers = dict(exc.headers or {})
        if exc.status_code == 404:
            detail = f"no route {request.url.path}; see /docs or /api/v1/calculators"
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request.app, request.scope))  # every route at the path
            detail = f"{request.method} is not allowed on {request.url.path}; allowed: {headers['Allow']}"
        return problem(exc.status_code, title, detail, instance=request.url.path, headers=headers or None)

    @app.exception_handler(RecursionError)
    async def on_recursion(request: Request, exc: RecursionError):
        return problem(400, "Body too deeply nested", "the JSON body nests too deeply to parse", kind="too-deep")

    @app.exception_handler(StoreUnavailable)
    async def on_store_unavailable(request: Request, exc: StoreUnavailable):  # a fault, not a bug: 503, the reason
        log.error("store unreadable on %s: %s", request.url.path, exc.reason)
        return problem(503, "Store unreadable", f"{exc.reason}; the service must be restarted on a sound store "
                       "(see /healthz)", kind="store-unavailable", instance=request.url.path)

    @app.exception_handler(Exception)
    async def on_error(request: Request, exc: Exception):  # a bug: say so in problem+json, log it
        log.exception("unhandled error on %s", request.url.path)
        return problem(500, "Internal error", f"{type(exc).__name__}: this is a bug in the service",
                       kind="internal", instance=request.url.path)


app = create_app()
