"""The API docs work offline: /docs (Swagger UI) and /redoc (ReDoc) load their assets from this service
(the installed fastapi-offline package), never from a CDN, under a Content-Security-Policy that allows
scripts only from this origin plus Swagger UI's inline start-up script by hash.

The browser tests run headless Chromium against a live server (the fixtures of test_browser.py) with
every host but 127.0.0.1 unresolvable, and fail on any request to another host or any CSP violation.
"""
from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest

from api.docs import ASSETS_URL, script_hashes
from tests.site import test_browser as live

ARGS, CHROMIUM = live.ARGS, live.CHROMIUM
server = live.server  # the live uvicorn fixture, reused

PAGES = ("/docs", "/redoc")


class _Refs(HTMLParser):
    """Every URL a page references (src/href), and the bodies of its inline scripts."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self.inline: list[str] = []
        self._in_inline = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.urls += [a[k] for k in ("src", "href") if a.get(k)]
        self._in_inline = tag == "script" and not a.get("src")
        if self._in_inline:
            self.inline.append("")

    def handle_data(self, data):
        if self._in_inline:
            self.inline[-1] += data

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_inline = False


def _refs(html: str) -> _Refs:
    p = _Refs()
    p.feed(html)
    return p


def _csp(header: str) -> dict[str, list[str]]:
    out = {}
    for part in filter(None, (p.strip() for p in header.split(";"))):
        name, *values = part.split()
        out[name] = values
    return out


@pytest.mark.parametrize("path", PAGES)
def test_docs_pages_reference_only_same_origin_assets(client, path):
    r = client.get(path)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    refs = _refs(r.text)
    assert refs.urls, "the page references no assets"
    for url in refs.urls:
        parts = urlsplit(url)
        assert not parts.scheme and not parts.netloc, f"{path} references {url} on another host"
        assert url.startswith((ASSETS_URL + "/", "/openapi.json")), url
    assert not re.search(r"https?://", r.text), f"{path} names an absolute URL"
    assert "fonts.googleapis" not in r.text and "cdn.jsdelivr" not in r.text


@pytest.mark.parametrize("asset, ctype", [
    ("swagger-ui-bundle.js", "text/javascript"), ("swagger-ui.css", "text/css"),
    ("redoc.standalone.js", "text/javascript"), ("favicon.png", "image/png")])
def test_assets_are_served_with_their_content_type(client, asset, ctype):
    r = client.get(f"{ASSETS_URL}/{asset}")
    assert r.status_code == 200
    assert r.headers["content-type"].split(";")[0] == ctype
    assert r.headers["x-content-type-options"] == "nosniff"
    assert len(r.content) > 1000


def test_every_referenced_asset_answers_200(client):
    for path in PAGES:
        for url in _refs(client.get(path).text).urls:
            if url.startswith(ASSETS_URL):
                assert client.get(url).status_code == 200, url


def test_swagger_csp_allows_exactly_its_own_inline_script(client):
    r = client.get("/docs")
    csp = _csp(r.headers["content-security-policy"])
    inline = _refs(r.text).inline
    assert len(inline) == 1 and "SwaggerUIBundle(" in inline[0]
    digest = base64.b64encode(hashlib.sha256(inline[0].encode()).digest()).decode()
    assert csp["script-src"] == ["'self'", f"'sha256-{digest}'"]
    assert script_hashes(r.text) == [f"'sha256-{digest}'"]
    assert csp["default-src"] == ["'self'"]
    assert csp["style-src"] == ["'self'", "'unsafe-inline'"]  # Swagger UI and ReDoc set inline styles
    assert csp["img-src"] == ["'self'", "data:"]
    assert csp["frame-ancestors"] == ["'none'"]
    assert "worker-src" not in csp and "connect-src" not in csp  # fetches fall back to 'self'
    assert r.headers["x-frame-options"] == "DENY"  # the other security headers still come from the middleware


def test_redoc_csp_has_no_inline_script_and_a_blob_worker(client):
    r = client.get("/redoc")
    csp = _csp(r.headers["content-security-policy"])
    assert _refs(r.text).inline == []
    assert csp["script-src"] == ["'self'"]
    assert csp["worker-src"] == ["'self'", "blob:"]
    assert csp["default-src"] == ["'self'"]


def test_the_relaxations_stay_on_the_docs_pages(client):
    """The site's own pages keep the site-wide policy: no hashes, no blob: workers, no CDN."""
    csp = client.get("/").headers["content-security-policy"]
    assert "sha256-" not in csp and "blob:" not in csp and "cdn." not in csp


def test_the_builtin_cdn_docs_are_off(app):
    assert app.docs_url is None and app.redoc_url is None
    paths = {getattr(r, "path", None) for r in app.routes}
    assert {"/docs", "/redoc", ASSETS_URL} <= paths
    assert "/docs/oauth2-redirect" not in paths


# --- in a browser, offline -------------------------------------------------------------------------

browser_only = pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium is not installed at "
                                  "/usr/bin/chromium (apt-get install -y chromium fonts-noto-cjk)")
#: every host name but the server's fails to resolve: a CDN reference cannot load by accident
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
#: records CSP violations the page reports (Chromium also logs them to the console)
WATCH_CSP = """window.__csp = [];
document.addEventListener('securitypolicyviolation',
  e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"""


@pytest.fixture(scope="module")
def offline_browser():
    yield from live.launched([*ARGS, OFFLINE])


@pytest.fixture()
def watched(offline_browser, server):
    """A page plus what it did: requests to other origins, console errors, CSP violations."""
    ctx = offline_browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(30_000)
    page = ctx.new_page()
    page.add_init_script(WATCH_CSP)
    origin = urlsplit(server).netloc
    seen = {"foreign": [], "console": [], "failed": []}
    page.on("request", lambda r: urlsplit(r.url).scheme in ("http", "https") and urlsplit(r.url).netloc != origin
            and seen["foreign"].append(r.url))
    page.on("console", lambda m: m.type in ("error", "warning") and seen["console"].append(m.text))
    page.on("requestfailed", lambda r: seen["failed"].append(r.url))
    yield page, seen
    ctx.close()


#: ReDoc 2.5's sidebar footer ("API docs by Redocly") always shows this image, with no option to turn it
#: off; img-src 'self' blocks it (so the browser never contacts the host) and ReDoc drops the <img>.
REDOC_ATTRIBUTION_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


def _assert_clean(page, seen, allowed=()):
    violations = [v for v in page.evaluate("window.__csp") if not v.endswith(allowed)]
    csp_console = [t for t in seen["console"] if ("Content Security Policy" in t or "Refused to" in t)
                   and not any(a in t for a in allowed)]
    assert not violations and not csp_console, f"CSP violations: {violations} {csp_console}"
    foreign = [u for u in seen["foreign"] if u not in allowed]
    assert not foreign, f"requests to other hosts: {foreign}"
    failed = [u for u in seen["failed"] if u not in allowed]
    assert not failed, f"failed requests: {failed}"


@browser_only
def test_swagger_ui_lists_the_operations_and_runs_kv_cache(watched, server):
    page, seen = watched
    page.goto(server + "/docs")
    op = page.locator("#operations-calculators-kv_cache")
    op.wait_for(state="visible")
    assert page.locator(".opblock").count() > 20, "Swagger UI lists too few operations"
    assert "KV cache" in op.locator(".opblock-summary").inner_text()

    op.locator(".opblock-summary").first.click()
    op.locator("button.try-out__btn").click()
    body = op.locator("textarea.body-param__text")
    body.wait_for(state="visible")
    assert '"model": "qwen3-8b"' in body.input_value()  # the worked example fills the body
    op.locator("button.execute").click()
    status = op.locator(".live-responses-table .response .response-col_status").first
    status.wait_for(state="visible")
    assert status.inner_text().strip() == "200"
    shown = op.locator(".live-responses-table .response-col_description pre").first
    shown.wait_for(state="visible")
    assert '"calculator": "kv-cache"' in shown.inner_text()
    _assert_clean(page, seen)


@browser_only
def test_redoc_renders_offline(watched, server):
    page, seen = watched
    page.goto(server + "/redoc")
    op = page.locator('[data-section-id="operation/kv_cache"]')
    op.wait_for(state="attached")
    assert "KV cache and attention state size" in op.inner_text()
    page.locator('[role="search"] input, input[placeholder="Search..."]').first.fill("kv cache")
    page.locator('[role="search"] [role="menuitem"], .search-results li').first.wait_for(state="visible")
    _assert_clean(page, seen, allowed=(REDOC_ATTRIBUTION_LOGO,))
