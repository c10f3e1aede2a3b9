"""Interactive API docs that work offline: Swagger UI at /docs and ReDoc at /redoc.

The JavaScript and CSS come from the installed `fastapi-offline` package (MIT; it ships the
swagger-ui-dist bundle, Apache-2.0, and the ReDoc standalone bundle, MIT), served from where pip
put them under ASSETS_URL: nothing is fetched from a CDN and nothing is copied into the repository.

The pages are FastAPI's own `get_swagger_ui_html` / `get_redoc_html`. Each carries its own
Content-Security-Policy (api.middleware.docs_csp), which the security-headers middleware leaves as
it is: Swagger UI's one inline start-up script is allowed by its SHA-256 hash, ReDoc's search may
start a worker from a blob: URL; every other HTML page keeps the site-wide policy.
"""
from __future__ import annotations

import base64
import hashlib
import re
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import HTMLResponse

from api.middleware import docs_csp

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs-assets"
#: swagger-ui-bundle.js, swagger-ui.css, redoc.standalone.js, favicon.png
ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))

#: validatorUrl None: no badge image from validator.swagger.io
SWAGGER_PARAMETERS = {"validatorUrl": None, "displayRequestDuration": True}

_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def script_hashes(html: str) -> list[str]:
    """CSP source expressions ('sha256-…') for the inline <script> blocks of a page, byte for byte."""
    return [f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'"
            for body in _INLINE_SCRIPT.findall(html)]


def _with_csp(response: HTMLResponse, *, worker_blob: bool = False) -> HTMLResponse:
    html = response.body.decode()
    response.headers["content-security-policy"] = docs_csp(script_hashes(html), worker_blob=worker_blob)
    return response


def mount(app: FastAPI) -> None:
    """Serve the assets and the two pages; the app itself is built with docs_url=None, redoc_url=None."""
    if not (ASSETS_DIR / "swagger-ui-bundle.js").is_file():  # pragma: no cover - a broken install
        raise RuntimeError(f"fastapi-offline's assets are missing from {ASSETS_DIR}")
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_csp(get_swagger_ui_html(
            openapi_url=root + app.openapi_url, title=f"{app.title} — API (Swagger UI)",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            oauth2_redirect_url=None,  # the API has no OAuth2 flows
            swagger_ui_parameters={**SWAGGER_PARAMETERS, **(app.swagger_ui_parameters or {})}))

    @app.get(REDOC_URL, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_csp(get_redoc_html(
            openapi_url=root + app.openapi_url, title=f"{app.title} — API (ReDoc)",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False), worker_blob=True)
