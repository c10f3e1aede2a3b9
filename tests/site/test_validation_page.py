"""The /validation page: it shows the numbers of its JSON twin (headline and every table cell carry the JSON path and
value they show), every stored point once with links to its benchmark page and to the calculator computing its
request, one chart dot per compared point with both TPOTs, the y = x line and the ±25 % band; filters as the JSON
route; no inline script or style; bad queries are HTML 422 pages; the navigation and /benchmarks link it.
The report is the one computed for the session (api.routes.validation keeps it per store version)."""
from __future__ import annotations

from html.parser import HTMLParser

import pytest


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.twins: list[str] = []
        self.values: dict[str, str] = {}
        self.rows: list[str] = []
        self.dots: list[str] = []
        self.polygons = 0
        self.lines: list[dict] = []
        self.inline: list[str] = []
        self._in_rows = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
            if "twin-link" in (a.get("class") or ""):
                self.twins.append(a["href"])
        if a.get("data-path"):
            self.values[a["data-path"]] = a.get("data-value") or ""
        if tag == "table":
            self._in_rows = a.get("id") == "validation-rows"
        if tag == "tr" and self._in_rows and a.get("data-id"):
            self.rows.append(a["data-id"])
        if tag == "circle" and "dot" in (a.get("class") or ""):
            self.dots.append(a["data-id"])
        if tag == "polygon" and "band" in (a.get("class") or ""):
            self.polygons += 1
        if tag == "line" and "ref-line" in (a.get("class") or ""):
            self.lines.append(a)
        if tag in ("script", "style") or "style" in a or any(k.startswith("on") for k in a):
            self.inline.append(tag)


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def page(client):
    r = client.get("/validation")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    return parse(r.text)


@pytest.fixture(scope="module")
def twin(client, page):
    assert page.twins == ["/api/v1/validation"]
    return client.get(page.twins[0]).json()


def _number(text: str) -> float | None:
    return None if text == "" else float(text)


def test_the_page_shows_the_numbers_of_its_json_twin(page, twin):
    for path in ("compared", "points", "overall.tpot_s.median_abs_error", "overall.tpot_s.within_25_percent",
                 "overall.output_tokens_per_s_per_device.median_abs_error"):
        node = twin
        for part in path.split("."):
            node = node[part]
        assert _number(page.values[path]) == pytest.approx(node), path
    cells = 0
    for table in ("by_source", "by_hardware", "by_model_family", "by_framework", "by_load"):
        for group, entry in twin[table].items():
            assert int(page.values[f"{table}.{group}.points"]) == entry["points"], (table, group)
            for metric in ("tpot_s", "output_tokens_per_s_per_device", "ttft_s"):
                shown = _number(page.values[f"{table}.{group}.{metric}.median_abs_error"])
                assert shown == pytest.approx(entry[metric]["median_abs_error"]), (table, group, metric)
                cells += 1
    assert cells >= 3 * len(twin["by_source"]) >= 3
    loso = twin["leave_one_source_out"]
    for table in ("by_source", "by_hardware"):      # the calibrated tables, each source left out, beside them
        for group, entry in loso[table].items():
            shown = page.values[f"leave_one_source_out.{table}.{group}.tpot_s.median_abs_error"]
            assert _number(shown) == pytest.approx(entry["tpot_s"]["median_abs_error"]), (table, group)
    assert _number(page.values["leave_one_source_out.overall.tpot_s.median_abs_error"]) == pytest.approx(
        loso["overall"]["tpot_s"]["median_abs_error"])


def test_every_stored_point_is_listed_once_with_its_links(client, page, twin):
    assert page.rows == [r["id"] for r in twin["rows"]] and len(set(page.rows)) == twin["stored"]
    assert len(page.rows) == len(client.app.state.store.all("benchmark"))
    for r in twin["rows"]:
        assert r["page_url"] in page.links, r["id"]
        if r["compared"]:
            assert r["calculator_url"] in page.links, r["id"]
            if "tpot_s" in r["errors"]:
                assert _number(page.values[f"rows.{r['id']}.errors.tpot_s"]) == pytest.approx(r["errors"]["tpot_s"])


def test_the_chart_has_a_dot_per_compared_point_with_both_tpots_the_diagonal_and_the_band(page, twin):
    expected = [r["id"] for r in twin["rows"] if r["compared"] and "tpot_s" in r["errors"]]
    assert page.dots == expected and expected
    assert page.polygons == 1 and len(page.lines) == 1
    line = page.lines[0]   # y = x on equal log axes: from the bottom-left corner to the top-right one
    assert float(line["x1"]) < float(line["x2"]) and float(line["y1"]) > float(line["y2"])


def test_a_filtered_page_shows_its_filtered_twin(client, twin):
    src = next(r["source"] for r in twin["rows"] if r["compared"])
    r = client.get(f"/validation?source={src}&compared=true")
    p = parse(r.text)
    assert p.twins == [f"/api/v1/validation?source={src}&compared=true"]
    body = client.get(p.twins[0]).json()
    assert p.rows == [x["id"] for x in body["rows"]] and body["rows"]
    assert {x["source"] for x in body["rows"]} == {src} and all(x["compared"] for x in body["rows"])
    assert int(p.values["stored"]) == twin["stored"] and int(p.values["points"]) == body["points"]


def test_the_pages_links_of_its_own_answer(client, page):
    own = sorted({h for h in page.links if h.startswith("/validation?")})
    assert own
    for url in own[:8]:
        assert client.get(url).status_code == 200, url


def test_no_inline_script_or_style_and_the_site_policy(client, page):
    assert not page.inline
    csp = client.get("/validation").headers["content-security-policy"]
    assert "'unsafe-inline'" not in csp and "script-src" in csp


@pytest.mark.parametrize("url", ["/validation?compared=perhaps", "/validation?framework=nope"])
def test_bad_queries_are_html_422_pages(client, url):
    r = client.get(url)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html") and "<main" in r.text


def test_the_navigation_and_the_benchmarks_page_link_it(client):
    assert "/validation" in parse(client.get("/").text).links
    assert "/validation" in parse(client.get("/benchmarks").text).links
    assert 'href="/validation" aria-current="page"' in client.get("/validation").text
