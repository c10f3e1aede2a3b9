"""The /benchmarks pages: the list shows the points its JSON twin lists, grouped by model and accelerator; every
point's page answers with its source, deep link, locator and the text as published; every internal link of the
pages answers 200; no inline script or style; bad queries and unknown ids are HTML 422 and 404 pages."""
from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from markupsafe import escape

from tests.site.test_list_twins import items_of


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.twins: list[str] = []
        self.groups = 0
        self.inline: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
            if "twin-link" in (a.get("class") or ""):
                self.twins.append(a["href"])
        if tag == "h2" and "bench-group" in (a.get("class") or ""):
            self.groups += 1
        if tag in ("script", "style") or "style" in a or any(k.startswith("on") for k in a):
            self.inline.append(tag)


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def points(client):
    return client.app.state.store.all("benchmark")


#: what the benchmark pages link to themselves (the navigation and the footer are crawled by tests/site/test_pages.py)
OWN_LINKS = ("/benchmarks", "/api/v1/benchmarks", "/sources/", "/models/", "/hardware/", "/api/v1/export/benchmarks.")


def _internal(links: list[str]) -> set[str]:
    return {h.split("#")[0] for h in links if h.startswith(OWN_LINKS)}


@pytest.mark.parametrize("query", ["", "framework=sglang", "sort=output_tokens_per_s_per_device&desc=true", "limit=5&offset=3"])
def test_the_list_page_shows_what_its_json_twin_lists(client, query):
    r = client.get("/benchmarks" + ("?" + query if query else ""))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = items_of(r.text)
    assert page.twin == "/api/v1/benchmarks" + ("?" + query if query else "")
    body = client.get(page.twin).json()
    assert page.ids == [p["id"] for p in body["items"]] and page.total == body["total"]
    assert page.ids or query == "framework=sglang"


def test_the_list_groups_points_by_model_and_accelerator(client):
    html = client.get("/benchmarks").text
    shown = client.get(parse(html).twins[0]).json()["items"]   # the page's points, in its order (one page of them)
    assert shown
    groups = []
    for p in shown:
        if not groups or groups[-1] != (p["model_hf"], p["hardware_name"]):
            groups.append((p["model_hf"], p["hardware_name"]))
    assert parse(html).groups == len(groups) >= 1
    assert str(escape(groups[0][0])) in html and str(escape(groups[0][1])) in html


def test_the_model_and_hardware_of_a_point_filter_the_list(client, points):
    p0 = next(p for p in points if p.get("model") and p.get("hardware"))
    page = items_of(client.get(f"/benchmarks?model={p0['model']}&hardware={p0['hardware']}").text)
    assert p0["id"] in page.ids
    assert page.ids == [p["id"] for p in points if (p.get("model"), p.get("hardware")) == (p0["model"], p0["hardware"])]


def test_every_point_has_a_page_with_its_source_link_locator_and_twin(client, points):
    for p in points:
        r = client.get(f"/benchmarks/{p['id']}")
        assert r.status_code == 200, p["id"]
        page = parse(r.text)
        assert page.twins == [f"/api/v1/benchmarks/{p['id']}"], p["id"]
        assert p["url"] in page.links and f"/sources/{p['source']}" in page.links, p["id"]
        assert str(escape(p["locator"])) in r.text and str(escape(p["as_published"])) in r.text, p["id"]
        assert not page.inline, (p["id"], page.inline)


def test_every_internal_link_of_the_pages_answers(client, points):
    pages = ["/benchmarks", "/benchmarks?sort=date", f"/benchmarks/{points[0]['id']}", f"/benchmarks/{points[-1]['id']}"]
    links: set[str] = set()
    for url in pages:
        page = parse(client.get(url).text)
        assert not page.inline, url
        links |= _internal(page.links)
    assert {"/benchmarks", "/api/v1/export/benchmarks.csv"} <= links
    assert any(u.startswith("/sources/") for u in links) and any(u.startswith("/benchmarks/") for u in links)
    for url in sorted(links):
        r = client.get(url)
        assert r.status_code == 200, (url, r.status_code)


def test_the_navigation_links_the_benchmarks(client):
    home = parse(client.get("/").text)
    assert "/benchmarks" in home.links
    assert 'href="/benchmarks" aria-current="page"' in client.get("/benchmarks").text


def test_the_pages_send_the_site_policy(client, points):
    for url in ("/benchmarks", f"/benchmarks/{points[0]['id']}"):
        csp = client.get(url).headers["content-security-policy"]
        assert "'unsafe-inline'" not in csp and "script-src" in csp


@pytest.mark.parametrize("url, status", [("/benchmarks?framework=nope", 422), ("/benchmarks?devices=0", 422),
                                         ("/benchmarks/no-such-point", 404)])
def test_bad_queries_and_unknown_points_are_html_error_pages(client, url, status):
    r = client.get(url)
    assert r.status_code == status and r.headers["content-type"].startswith("text/html")
    assert "<main" in r.text
    if status == 404:
        assert urlsplit(url).path.rsplit("/", 1)[-1] in r.text
