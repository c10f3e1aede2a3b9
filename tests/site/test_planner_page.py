"""The deployment planner's page: headline, the Pareto chart (one frontier, the best plan marked, the SLO
band), the candidates table sorted through the URL (checked against the JSON outputs), view-parameter
errors as 422 pages, and the JSON twin."""
from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import pytest
from markupsafe import escape

from api.site import planner
from api.urls import urls
from calculators.framework.registry import REGISTRY

NAME = "deployment-plan"
def test_the_planner_is_registered():
    assert NAME in REGISTRY


class Page(HTMLParser):
    """Rows of the candidates table (in page order), header links, the twin link, scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.heads: dict[str, str] = {}
        self.sorted_by: list[str] = []
        self.twins: list[str] = []
        self.scripts = 0
        self.values: dict[str, str] = {}
        self._th: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "tr" and a.get("data-index") is not None:
            self.rows.append({"index": int(a["data-index"]), "cls": (a.get("class") or "").split()})
        if tag == "th" and a.get("scope") == "col":
            self._th = a
        if tag == "a" and self._th is not None and a.get("href") and "sort=" in a["href"]:
            key = parse_qs(urlsplit(a["href"]).query)["sort"][0]
            self.heads[key] = a["href"]
            if self._th.get("aria-sort"):
                self.sorted_by.append(key)
        if tag == "a" and "twin-link" in (a.get("class") or ""):
            self.twins.append(a["href"])
        if a.get("data-path") and "data-value" in a:
            self.values.setdefault(a["data-path"], a["data-value"])

    def handle_endtag(self, tag):
        if tag == "th":
            self._th = None


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    return p


def pareto_svg(html: str) -> str:
    m = re.search(r'<svg class="pareto".*?</svg>', html, re.DOTALL)
    assert m, "no Pareto chart on the page"
    return m.group(0)


@pytest.fixture(scope="module")
def example():
    return dict(REGISTRY[NAME].example)


@pytest.fixture(scope="module")
def outputs(client, example):
    r = client.post(urls.api_item("calculator", NAME), json=example)
    assert r.status_code == 200, r.text[:300]
    return r.json()["outputs"]


def page(client, body, **view):
    return client.get(urls.calculator_view(NAME, body, **view))


def expected_order(cands: list[dict], key: str, desc: bool) -> list[int]:
    """The order the page promises: by the column, empty values last, ties in computed order."""
    def value(c):
        v = c.get(key)
        return v.get("total") if isinstance(v, dict) else v
    present = [i for i, c in enumerate(cands) if value(c) is not None]
    present.sort(key=lambda i: value(cands[i]), reverse=desc)
    return present + [i for i, c in enumerate(cands) if value(c) is None]


def test_example_page_shows_headline_chart_and_table(client, example, outputs):
    r = page(client, example)
    assert r.status_code == 200, r.text[:500]
    html = r.text
    assert str(escape(outputs["headline"])) in html
    svg = pareto_svg(html)
    assert svg.count('class="frontier"') == 1 and svg.count("<path") == 1
    assert svg.count('class="best-marker"') == 1 and "best: " in svg
    assert svg.count('class="slo-band"') == 1
    assert "tokens/s per user" in svg and "tokens/s per device" in svg
    fitting = sum(1 for c in outputs["candidates"] if c["fits"] and (c["tokens_per_s_per_user"] or 0) > 0
                  and (c["tokens_per_s_per_device"] or 0) > 0)
    assert 0 < svg.count('class="pdot') <= fitting
    p = parse(html)
    assert p.scripts == 0
    assert p.rows
    best_rows = [row for row in p.rows if "best" in row["cls"]]
    assert len(best_rows) == 1
    best = outputs["candidates"][best_rows[0]["index"]]
    assert planner.plan_key(best) == planner.plan_key(outputs["best"])
    pareto_rows = {row["index"] for row in p.rows if "pareto" in row["cls"]}
    assert len(pareto_rows) == len(outputs["pareto"])
    # units in the cells; the numbers behind them are the JSON's
    assert " ms<" in html and " GB<" in html and "$" in html
    i = best_rows[0]["index"]
    assert math.isclose(float(p.values[f"candidates.{i}.cost_per_mtok_usd"]), outputs["best"]["cost_per_mtok_usd"], rel_tol=1e-12)
    assert math.isclose(float(p.values[f"candidates.{i}.memory_per_device_bytes.total"]),
                        outputs["best"]["memory_per_device_bytes"]["total"], rel_tol=1e-12)


def test_the_generic_result_table_does_not_repeat_the_candidates(client, example):
    html = page(client, example).text
    assert '<code>candidates</code>' not in html and '<code>pareto</code>' not in html
    assert 'data-path="best.cost_per_mtok_usd"' in html


@pytest.mark.parametrize("key, desc", [("cost_per_mtok_usd", False), ("tokens_per_s_per_user", True),
                                       ("cost_per_mtok_usd", True), ("hardware", False)])
def test_sorting_orders_rows_as_the_json_says(client, example, outputs, key, desc):
    cands = outputs["candidates"]
    html = page(client, example, sort=key, desc=1 if desc else None).text
    p = parse(html)
    assert p.sorted_by == [key]
    shown = [row["index"] for row in p.rows]
    want = expected_order(cands, key, desc)
    assert shown == [i for i in want if i in set(shown)]
    assert set(want[:planner.ROWS]) <= set(shown)       # the first rows of the order are all there
    nums = [cands[i][key] for i in shown if isinstance(cands[i][key], (int, float))]
    assert nums == sorted(nums, reverse=desc)


def test_sort_by_cost_and_by_speed_differ_and_links_keep_the_body(client, example, outputs):
    by_cost = [r["index"] for r in parse(page(client, example, sort="cost_per_mtok_usd").text).rows]
    by_user = [r["index"] for r in parse(page(client, example, sort="tokens_per_s_per_user", desc=1).text).rows]
    assert by_cost != by_user
    cheapest = min((c for c in outputs["candidates"] if c["cost_per_mtok_usd"] is not None), key=lambda c: c["cost_per_mtok_usd"])
    fastest = max(outputs["candidates"], key=lambda c: c["tokens_per_s_per_user"] or 0)
    assert outputs["candidates"][by_cost[0]]["cost_per_mtok_usd"] == cheapest["cost_per_mtok_usd"]
    assert outputs["candidates"][by_user[0]]["tokens_per_s_per_user"] == fastest["tokens_per_s_per_user"]
    heads = parse(page(client, example).text).heads
    assert set(heads) == {c.key for c in planner.columns(outputs["candidates"])}
    for href in heads.values():
        q = parse_qs(urlsplit(href).query)
        assert q["body"] and urlsplit(href).fragment == "candidates"
    # the header of the active column sorts the other way; following a link answers the same table
    active = parse(page(client, example, sort="tpot_s").text).heads["tpot_s"]
    assert parse_qs(urlsplit(active).query).get("desc") == ["1"]
    assert client.get(active).status_code == 200


def test_default_order_is_the_planners_ranking_best_first(client, example, outputs):
    rows = parse(page(client, example).text).rows
    assert "best" in rows[0]["cls"]
    meets = [outputs["candidates"][r["index"]]["meets_slo"] for r in rows]
    assert meets == sorted(meets, reverse=True)


def test_long_tables_show_best_pareto_and_first_rows_with_a_show_all_link(client, example, outputs):
    n = len(outputs["candidates"])
    html = page(client, example).text
    rows = parse(html).rows
    assert n > planner.ROWS, "the example must have more candidates than the table shows at first"
    assert len(rows) < n and 'class="gap"' in html and 'class="show-all"' in html
    link = re.search(r'class="show-all" href="([^"]+)"', html).group(1)
    full = client.get(link.replace("&amp;", "&"))
    assert full.status_code == 200
    assert len(parse(full.text).rows) == min(n, planner.MAX_ROWS)
    assert len(full.content) < 2_000_000


@pytest.mark.parametrize("query, field", [({"sort": "no_such_column"}, "sort"), ({"desc": "maybe"}, "desc"),
                                          ({"all": "lots"}, "all")])
def test_bad_view_parameters_are_422_pages_naming_them(client, example, query, field):
    r = client.get(urls.calculator_view(NAME, example, **query))
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert 'class="problem"' in r.text and f"<code>{field}</code>" in r.text
    assert escape(next(iter(query.values()))) in r.text
    assert 'name="body"' in r.text


def test_view_parameters_are_not_request_fields():
    fields = set(REGISTRY[NAME].request_model.model_fields)
    assert not fields & set(planner.VIEW_PARAMS)


def test_json_twin_is_the_computed_plan(client, example, outputs):
    """The page's JSON twin answers the page's question: the envelope of the same request, not the description."""
    r = page(client, example, sort="cost_per_hour_usd")
    twins = parse(r.text).twins
    assert twins and twins[0] == urls.calculator(NAME, example, format="json")
    t = client.get(twins[0])
    assert t.status_code == 200 and t.headers["content-type"].startswith("application/json")
    env = t.json()
    assert env["calculator"] == NAME and env["outputs"]["best"] == outputs["best"]
    # the JSON's explanation URL is this page, computing the same plan
    back = client.get(env["explanation_url"])
    assert back.status_code == 200 and str(escape(outputs["headline"])) in back.text


def test_a_plan_nothing_meets_still_draws_and_lists(client, example):
    body = {**example, "tpot_s": 0.001}
    r = page(client, body)
    assert r.status_code == 200
    html = r.text
    assert "No configuration serves" in html
    assert 'class="best-marker"' not in pareto_svg(html) and 'class="slo-band"' in pareto_svg(html)
    assert parse(html).rows
