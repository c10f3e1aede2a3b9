"""The site's Content-Security-Policy (audit 27, finding 10): no page may run inline script, so script-src never
says 'unsafe-inline' (nor 'unsafe-eval'), and no page carries an inline <script> with a body, an on* event
handler or a javascript: URL that only 'unsafe-inline' would let run. The site uses no inline styles either,
so its style-src is 'self' only (the API docs pages, /docs and /redoc, have their own policy: api.docs)."""
from __future__ import annotations

from html.parser import HTMLParser

import pytest

from tests.site.test_pages import page_urls

#: pages besides page_urls: HTML error pages (404, 422) and the pages that need a query
MORE_PAGES = ["/no-such-page", "/cases/no-such-case", "/models?limit=0", "/calculators/kv-cache?model=nonsense",
              "/downloads", "/measurements", "/measurements/gemm?system=b200_sxm&m=4096&limit=5", "/calibration", "/validation",
              "/calculators/kv-cache?model=qwen3-8b&tokens=1024,2048,4096,8192"]   # the last draws an SVG chart


def directives(header: str) -> dict[str, list[str]]:
    """A CSP header as {directive: [source expressions]}."""
    out = {}
    for part in header.split(";"):
        name, *values = part.split()
        out[name.lower()] = values
    return out


class InlineCode(HTMLParser):
    """What of a page needs 'unsafe-inline': script bodies, event-handler attributes, javascript: URLs, inline
    styles (<style> bodies and style attributes)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in: str | None = None
        self._scripts = self._styles = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._in = tag
        for name, value in attrs:
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=…>")
            if name == "style":
                self.found.append(f"<{tag} style=…>")
            if name in ("href", "src", "action", "formaction") and (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}=javascript:…>")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in and data.strip():
            self.found.append(f"inline <{self._in}>: {data.strip()[:60]!r}")


@pytest.fixture(scope="module")
def pages(client) -> list[str]:
    urls = page_urls(client.app.state.store) + MORE_PAGES
    return [u for u in dict.fromkeys(urls)]


def test_every_html_page_forbids_inline_script(client, pages):
    seen = 0
    for url in pages:
        r = client.get(url)
        if not r.headers.get("content-type", "").startswith("text/html"):
            continue
        seen += 1
        csp = directives(r.headers["content-security-policy"])
        script = csp.get("script-src", csp.get("default-src"))
        assert "'unsafe-inline'" not in script and "'unsafe-eval'" not in script, (url, r.status_code, csp)
        assert "'unsafe-inline'" not in csp.get("style-src", []), (url, csp)
        assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'self'"], (url, csp)
        assert csp["frame-ancestors"] == ["'none'"], (url, csp)
        p = InlineCode()
        p.feed(r.text)
        assert not p.found, (url, p.found)
    assert seen >= len(pages) - 2            # (every one of them is HTML; a few may answer otherwise)


def test_the_docs_pages_keep_their_own_hash_based_policy(client):
    """/docs and /redoc are not the site: their inline bootstrap scripts are allowed by hash, never by
    'unsafe-inline' (tests/site/test_docs_offline.py checks the hashes)."""
    for url in ("/docs", "/redoc"):
        csp = directives(client.get(url).headers["content-security-policy"])
        assert "'unsafe-inline'" not in csp["script-src"]


# --- in a browser: the policy blocks nothing the site uses -------------------------------------------

from tests.site.test_docs_offline import _assert_clean, browser_only, offline_browser, server, watched  # noqa: E402,F401

#: a page of every layout: home, lists, a record, a case, a calculator with its SVG chart, an error page
BROWSER_PAGES = ["/", "/hardware", "/models/qwen3-8b", "/cases", "/calculators/kv-cache?model=qwen3-8b&tokens=1024,2048,4096",
                 "/measurements", "/no-such-page"]


@browser_only
def test_the_site_runs_under_its_policy_without_violations(watched, server):
    """Chromium reports no CSP violation on the site's pages (styles from site.css, the inline SVG charts)."""
    page, seen = watched
    for url in BROWSER_PAGES:
        page.goto(server + url)
        assert page.locator("main").count() == 1, url
        assert page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent')").strip() \
            == "#1d4e89", url                                                  # site.css applied
    _assert_clean(page, seen)
