"""The HTML site through TestClient: every kind of page answers, unknown ids are HTML 404s, every
page links its JSON twin, calculator pages compute from GET parameters and explain the result."""
from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlencode

import pytest
from markupsafe import escape

from api import charts
from api.service import explanation_url
from calculators.framework.registry import REGISTRY


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.twins: list[str] = []
        self.scripts = 0
        self.data_values: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])
            if "twin-link" in (a.get("class") or ""):
                self.twins.append(a["href"])
        if tag == "script":
            self.scripts += 1
        if a.get("data-path") and "data-value" in a:
            self.data_values.setdefault(a["data-path"], a["data-value"])


def lookup(values: dict[str, str], path: str) -> float | None:
    """The number a page shows for an output path (a cell, or an element of a list cell)."""
    if path in values:
        try:
            return float(values[path])
        except ValueError:
            return None
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:cut])
        if head in values:
            try:
                node = json.loads(values[head])
                for p in parts[cut:]:
                    node = node[int(p)] if isinstance(node, list) else node[p]
                return float(node)
            except (ValueError, KeyError, IndexError, TypeError):
                return None
    return None


def parse(html: str) -> Links:
    p = Links()
    p.feed(html)
    return p


@pytest.fixture(scope="module")
def store(client):
    return client.app.state.store


def _first(store, kind: str, pred=lambda r: True):
    return next((r for r in store.all(kind) if pred(r)), None)


def page_urls(store) -> list[str]:
    """One URL of every kind of page the site serves (ids taken from the store)."""
    urls = ["/", "/cases", "/hardware", "/models", "/frameworks", "/links", "/prices", "/sources", "/calculators",
            "/search", "/search?q=KV+cache", "/search?q=%E6%8E%A8%E6%B5%8B%E8%A7%A3%E7%A0%81", "/coverage", "/claims",
            "/glossary", "/cases?chapter=2", "/cases?section=2&q=model", "/hardware?vendor=NVIDIA&sort=memory_bytes&desc=true",
            "/models?family=qwen&sort=layers", "/models?kind=moe", "/sources?kind=datasheet", "/links?kind=nvlink",
            "/frameworks?kind=inference-engine", "/hardware?limit=5&offset=5"]
    for kind, prefix in (("case", "/cases/"), ("hardware", "/hardware/"), ("model", "/models/"),
                         ("framework", "/frameworks/"), ("source", "/sources/")):
        rec = _first(store, kind)
        if rec:
            urls.append(prefix + rec.get("slug", rec.get("id")))
    urls += [f"/calculators/{name}" for name in REGISTRY]
    return urls


def test_every_kind_of_page_answers_200_html(client, store):
    for url in page_urls(store):
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:500])
        assert r.headers["content-type"].startswith("text/html")
        assert "<main" in r.text and "</html>" in r.text
        assert parse(r.text).scripts == 0, f"{url} uses JavaScript"


def test_every_case_page_answers(client, store):
    for case in store.all("case"):
        r = client.get(f"/cases/{case['slug']}")
        assert r.status_code == 200, case["slug"]
        assert case["title_zh"] in r.text


@pytest.mark.parametrize("kind", ["model", "hardware", "framework", "source"])
def test_every_fact_page_answers(client, store, kind):
    prefix = {"model": "/models/", "hardware": "/hardware/", "framework": "/frameworks/", "source": "/sources/"}[kind]
    for rec in store.all(kind):
        assert client.get(prefix + rec["id"]).status_code == 200, rec["id"]


@pytest.mark.parametrize("url", ["/cases/no-such-case", "/hardware/no-such-device", "/models/no-such-model",
                                 "/frameworks/no-such", "/sources/no-such", "/calculators/no-such", "/links/no-such",
                                 "/claims/no-such", "/glossary/no-such", "/no/such/page", "/static/no-such.css"])
def test_unknown_ids_are_html_404(client, url):
    r = client.get(url)
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert "Not found" in r.text and "<main" in r.text


def test_unknown_api_ids_stay_problem_json(client):
    r = client.get("/api/v1/cases/no-such-case")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")


def test_every_page_links_its_json_twin_and_the_twin_answers(client, store):
    for url in page_urls(store):
        if url.startswith("/search") and "q=" not in url:
            continue  # an empty search has no JSON question to ask
        twins = parse(client.get(url).text).twins
        assert twins, f"{url} has no JSON twin link"
        # a list or record page's twin is its API twin; a calculator page's is the computed answer (`_format=json`)
        assert twins[0].startswith(("/api/v1/", "/healthz")) or (
            url.startswith("/calculators/") and twins[0].startswith(url.split("?")[0]) and "_format=json" in twins[0]), twins[0]
        r = client.get(twins[0])
        assert r.status_code == 200, (url, twins[0], r.text[:300])
        assert r.headers["content-type"].startswith("application/json")


def test_list_twins_carry_the_same_filters(client):
    twins = parse(client.get("/hardware?vendor=NVIDIA&sort=power_w&limit=7").text).twins
    assert twins[0].startswith("/api/v1/hardware?") and "vendor=NVIDIA" in twins[0] and "limit=7" in twins[0]
    assert client.get(twins[0]).json()["limit"] == 7


def test_home_lists_sections_cases_and_entry_points(client, store):
    html = client.get("/").text
    links = set(parse(html).hrefs)
    assert {"/calculators", "/models", "/hardware", "/coverage", "/claims", "/sources"} <= links
    assert 'action="/search"' in html
    for case in store.all("case"):
        assert f"/cases/{case['slug']}" in links
        assert case["title_zh"] in html and case["title_en"] in html
    sections = {c.get("section") for c in store.all("case")}
    assert all(s in html for s in sections if s)


def test_case_page_shows_derivations_facts_related_and_source(client, store):
    case = _first(store, "case", lambda c: c.get("uses") and c.get("related") and any(
        d["case"] == c["slug"] and d.get("calculator") in REGISTRY for d in store.all("derivation")))
    assert case is not None, "no case with uses, related cases and a bound worked example in the store"
    html = client.get(f"/cases/{case['slug']}").text
    links = set(parse(html).hrefs)
    assert case["source_url"] in links
    for rel in case["related"]:
        assert f"/cases/{rel}" in links
    for kind, ids in case["uses"].items():
        for i in ids:
            assert any(i in h for h in links), (kind, i)
    for d in store.all("derivation"):
        if d["case"] != case["slug"]:
            continue
        assert f'id="{d["name"]}"' in html
        if d.get("calculator"):
            assert d["calculator"] in REGISTRY, (d["id"], d["calculator"])
            assert escape(explanation_url(d["calculator"], d["request"])) in html


def test_recompute_links_reproduce_every_bound_example(client, store):
    """The recompute link of a bound worked example opens the calculator page showing the expected numbers."""
    bound = [d for d in store.all("derivation") if d.get("calculator") and d.get("expected")]
    assert bound, "no bound worked example in the store yet"
    assert [d["id"] for d in bound if d["calculator"] not in REGISTRY] == []
    for d in bound:
        r = client.get(explanation_url(d["calculator"], d["request"]))
        assert r.status_code == 200, (d["id"], r.text[:400])
        values = parse(r.text).data_values
        for path, want in d["expected"].items():
            if not isinstance(want, (int, float)) or isinstance(want, bool):
                continue
            got = lookup(values, path)
            assert got is not None, (d["id"], path)
            assert math.isclose(got, float(want), rel_tol=1e-6, abs_tol=1e-12), (d["id"], path, got, want)


def test_claim_recompute_links_show_the_expected_numbers(client, store):
    claims = store.all("claim")
    assert claims, "no audited claim in the store"
    assert [c["id"] for c in claims if c["calculator"] not in REGISTRY or not c.get("expected")] == []
    html = client.get("/claims").text
    for c in claims:
        url = explanation_url(c["calculator"], c["request"])
        assert escape(url) in html, c["id"]
        values = parse(client.get(url).text).data_values
        for path, want in c["expected"].items():
            if isinstance(want, (int, float)) and not isinstance(want, bool):
                got = lookup(values, path)
                assert got is not None and math.isclose(got, float(want), rel_tol=1e-6, abs_tol=1e-12), (c["id"], path)


def test_glossary_entries_link_their_papers(client, store):
    entries = store.all("glossary")
    assert entries, "no glossary entries stored"
    html = client.get("/glossary").text
    for g in entries:
        assert f'id="{g["id"]}"' in html
        if g.get("paper"):
            assert f'href="/sources/{g["paper"]}"' in html


def test_model_page_computes_kv_and_weights_live(client, store):
    assert store.get("model", "qwen3-8b") is not None, "qwen3-8b is not in the store"
    html = client.get("/models/qwen3-8b").text
    assert "kv-cache" in REGISTRY and "weight-memory" in REGISTRY
    assert "147,456" in html  # 144 KiB per token in BF16, the book's number
    shown = re.search(r'data-path="weight-memory\.bytes_total">([0-9,.]+)</span>', html)
    assert shown, "the weight-memory bytes are not on the model page"
    want = client.post("/api/v1/calculators/weight-memory", json={"model": "qwen3-8b"}).json()["outputs"]["bytes_total"]
    assert math.isclose(float(shown.group(1).replace(",", "")), want, rel_tol=1e-6), (shown.group(1), want)
    assert "/sources/qwen3-8b-config" in html
    assert "num_key_value_heads" in html  # the locator of kv_heads


def test_model_page_degrades_without_a_calculator(client, store, monkeypatch):
    from api import site
    monkeypatch.delitem(site.REGISTRY, "weight-memory", raising=False)
    model = _first(store, "model")
    r = client.get(f"/models/{model['id']}")
    assert r.status_code == 200
    assert "weight-memory calculator is not registered" in r.text


def test_fact_numbers_link_source_and_locator(client, store):
    hw = _first(store, "hardware", lambda h: isinstance(h.get("memory_bytes"), dict))
    assert hw is not None, "no hardware with a memory fact"
    fact = hw["memory_bytes"]
    html = client.get("/hardware").text if len(store.all("hardware")) <= 50 else client.get(f"/hardware?q={hw['name']}").text
    assert f'href="/sources/{fact["source"]}"' in html
    detail = client.get(f"/hardware/{hw['id']}").text
    assert f'href="/sources/{fact["source"]}"' in detail
    if fact.get("locator"):
        assert escape(fact["locator"]) in detail
    if fact.get("source_url"):
        assert escape(fact["source_url"]) in detail
    assert "GiB" in detail and "GB" in detail  # decimal and binary readings, labelled


def test_source_page_lists_the_facts_citing_it(client, store):
    src = _first(store, "source", lambda s: store.facts_from_source(s["id"]))
    html = client.get(f"/sources/{src['id']}").text
    assert escape(src["url"]) in html
    fact = store.facts_from_source(src["id"])[0]
    assert fact["field"] in html


# --------------------------------------------------------------------------- calculators

@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_calculator_page_explains_its_example(client, name):
    html = client.get(f"/calculators/{name}").text
    assert 'class="steps"' in html and 'class="formula"' in html and 'class="substituted"' in html
    assert 'method="get"' in html and 'name="body"' in html
    assert f"/api/v1/calculators/{name}" in html
    calc = REGISTRY[name]
    assert escape(calc.title) in html


def test_calculator_body_parameter_and_fields_agree(client):
    assert "kv-cache" in REGISTRY
    body = {"model": "qwen3-8b", "tokens": 8192}
    a = parse(client.get("/calculators/kv-cache?" + urlencode({"body": json.dumps(body)})).text).data_values
    b = parse(client.get("/calculators/kv-cache?model=qwen3-8b&tokens=8192").text).data_values
    assert a["bytes_per_token"] == b["bytes_per_token"] == "147456"
    assert a["bytes_per_request"] == "1207959552"


def test_fields_override_the_body(client):
    assert "edge-transfer" in REGISTRY
    body = {"upload_bytes": 30e6, "uplink_bits_per_s": 20e6, "downlink_bits_per_s": 100e6}
    r = client.get("/calculators/edge-transfer?" + urlencode({"body": json.dumps(body), "upload_bytes": "60e6"}))
    assert parse(r.text).data_values["upload_s"] == "24"


@pytest.mark.parametrize("query, field", [
    ({"tokens": "lots"}, "tokens"),
    ({"body": "{not json"}, "body"),
    ({"body": "[1, 2]"}, "body"),
    ({"body": json.dumps({"model": "no-such-model", "tokens": 8})}, "model"),
    ({"body": json.dumps({"model": "qwen3-8b", "tokens": -1})}, "tokens"),
    ({"body": json.dumps({"model": "qwen3-8b", "tokens": 8, "bogus": 1})}, "bogus"),
])
def test_invalid_calculator_input_is_a_422_page_naming_the_field(client, query, field):
    assert "kv-cache" in REGISTRY
    r = client.get("/calculators/kv-cache?" + urlencode(query))
    assert r.status_code == 422, r.text[:300]
    assert r.headers["content-type"].startswith("text/html")
    assert 'class="problem"' in r.text and f"<code>{field}</code>" in r.text
    assert 'name="body"' in r.text  # the form is still there to fix the request


@pytest.mark.parametrize("url", ["/hardware?sort=nonsense", "/cases?chapter=x", "/models?limit=0", "/sources?offset=-1",
                                 "/search?limit=abc"])
def test_invalid_list_parameters_are_422_pages(client, url):
    r = client.get(url)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert 'class="problem"' in r.text


def test_no_calculator_page_is_a_500_on_odd_input(client):
    odd = ["", "0", "-1", "1e400", "[]", "{}", "null", "true", "\"x\"", "[1, 2, 3]", "1, 2, 3", "NaN"]
    for name, calc in REGISTRY.items():
        fields = list(calc.request_model.model_json_schema().get("properties", {}))[:4]
        for f in fields:
            for v in odd:
                r = client.get(f"/calculators/{name}?" + urlencode({f: v}))
                assert r.status_code < 500, (name, f, v, r.text[:300])


def test_sweep_draws_an_inline_svg_chart(client):
    assert "kv-cache" in REGISTRY
    html = client.get("/calculators/kv-cache?model=qwen3-8b&tokens=1024,2048,4096,8192").text
    assert "<svg" in html and "<polyline" in html
    assert "the sweep of your request" in html


def test_specific_charts(client):
    """KV bytes vs tokens per format; cost per success vs hit rate with break-even; TP step time;
    the edge-transfer budget as stacked bars."""
    assert {"kv-cache", "routing-cost", "parallel-split", "edge-transfer"} <= set(REGISTRY)
    html = client.get("/calculators/kv-cache?model=qwen3-8b&tokens=8192").text
    assert html.count('class="line s') >= 3 and "one line per kv_format" in html
    html = client.get("/calculators/routing-cost").text
    assert "<svg" in html and re.search(r'class="marker-label"[^>]*>[^<]+ vs [^<]+:', html)
    html = client.get("/calculators/parallel-split").text
    assert "<svg" in html and "memory_time_s" in html and "comm_time_s" in html
    html = client.get("/calculators/edge-transfer").text
    assert 'class="bar s0"' in html and "your request and its variants" in html


def test_pages_render_for_claims_glossary_and_search(client):
    assert client.get("/claims").status_code == 200


def test_claims_page_shows_page_value_ours_and_ratio(client, store):
    """Every claim's page numbers appear with the page's words, the page value, ours and ours ÷ page."""
    html = client.get("/claims", params={"limit": 100}).text
    claims = store.all("claim")
    rows = re.findall(r'<tr class="(within|outside)" data-path="([^"]+)" data-ratio="([^"]+)">', html)
    assert len(rows) == sum(len(c["page_numbers"]) for c in claims)
    article = html[html.index('id="prefix-cache-system-prompt-200mb"'):]
    article = article[:article.index("</article>")]
    assert "每次请求节省约200 MB" in article
    assert "200,000,000 B" in article and "655,360,000 B" in article and "×3.28" in article
    assert 'class="outside" data-path="prefix_kv_bytes"' in article
    weights = html[html.index('id="weights-70b-fp16-140gb"'):]
    assert re.search(r'<tr class="within" data-path="bytes_total" data-ratio="1\.0"', weights)
    assert client.get("/glossary").status_code == 200
    r = client.get("/search?q=%E6%8E%A8%E6%B5%8B%E8%A7%A3%E7%A0%81")  # 推测解码
    assert r.status_code == 200 and "result" in r.text


def test_pages_carry_provenance_in_the_footer(client, store):
    model = _first(store, "model")
    html = client.get(f"/models/{model['id']}").text
    footer = html[html.index('<footer'):]
    assert "Sources on this page" in footer and "/sources/" in footer
    assert "bojieli/ai-infra-book" in footer


# --------------------------------------------------------------------------- partial data

@pytest.fixture(scope="module")
def partial_client(tmp_path_factory):
    """A store with one case without derivations, a model and a device missing most facts."""
    import yaml
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.settings import Settings
    from knowledge.build import build

    data = tmp_path_factory.mktemp("partial-data")
    (data / "derivations").mkdir()
    src = {"id": "s1", "title": "A source", "url": "https://example.org/s1", "kind": "docs"}
    fact = lambda v: {"value": v, "source": "s1", "locator": "p. 1"}
    files = {
        "sources.yaml": [src],
        "cases.yaml": [{"slug": "lonely-case", "title_zh": "孤独的案例", "title_en": "A case without examples",
                        "section": "第 2 章 · 模型架构", "section_order": 2, "summary": "Nothing stored yet.",
                        "source_url": "https://example.org/case.md"}],
        "models.yaml": [{"id": "tiny-model", "name": "Tiny", "layers": fact(2)}],
        "hardware.yaml": [{"id": "bare-chip", "name": "Bare chip"}],
        "frameworks.yaml": [{"id": "fw", "name": "FW", "kind": "runtime"}],
        "links.yaml": [{"id": "l1", "name": "Link one"}],
        "prices.yaml": [{"id": "p1", "name": "P", "provider": "X"}],
    }
    for name, records in files.items():
        (data / name).write_text(yaml.safe_dump(records, allow_unicode=True), encoding="utf-8")
    db = tmp_path_factory.mktemp("partial-store") / "casebook.duckdb"
    build(db, data)
    app = create_app(Settings(db_path=db, build_if_stale=False))
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize("url", ["/", "/cases", "/cases/lonely-case", "/models", "/models/tiny-model", "/hardware",
                                 "/hardware/bare-chip", "/frameworks/fw", "/links", "/prices", "/sources", "/sources/s1",
                                 "/coverage", "/claims", "/glossary", "/search?q=tiny", "/calculators"])
def test_pages_render_with_partial_data(partial_client, url):
    r = partial_client.get(url)
    assert r.status_code == 200, r.text[:500]


def test_partial_case_says_what_is_missing(partial_client):
    html = partial_client.get("/cases/lonely-case").text
    assert "No worked examples are stored for this case yet" in html
    html = partial_client.get("/models/tiny-model").text
    assert "<code>kv-cache</code>: model: tiny-model has no layer_groups" in html
    assert "<code>weight-memory</code>: model: tiny-model has no sourced params_total" in html
    assert html.count('href="/calculators/kv-cache">open the calculator</a>') == 1


# --------------------------------------------------------------------------- charts (pure)

def test_layout_handles_gaps_logs_and_constants():
    def data(x_scale: str) -> charts.ChartData:
        return charts.ChartData("line", "t", "x", "y", series=[
            charts.Series("a", [1, 2, 4, 8, 16, 32], [1.0, None, 3.0, 4.0, 5.0, 6.0]),
            charts.Series("b", [1, 2, 4, 8, 16, 32], [2.0] * 6, constant=True)], markers=[(4.0, "even")],
            highlight_x=8, x_scale=x_scale)
    assert charts.layout(data("auto"))["log_x"] is False   # ×32 is under the two decades that make auto go log
    g = charts.layout(data("log"))
    assert g["log_x"] is True
    assert len([l for l in g["lines"] if l["title"] == "a"]) == 2  # the gap splits the line
    assert any(m["label"].startswith("even") for m in g["markers"]) and any(m.get("hl") for m in g["markers"])
    assert all(g["left"] <= float(p.split(",")[0]) <= g["right"] for l in g["lines"] for p in l["points"].split())


def test_stacked_bars_stack_to_the_total():
    d = charts.ChartData("stacked-bar", "t", "x", "seconds", bars_x=[1.0, 2.0],
                         parts=[charts.Series("p", [1, 2], [1.0, 2.0]), charts.Series("q", [1, 2], [1.0, 0.0])], y_unit="s")
    g = charts.layout(d)
    rects = [b for b in g["bars"] if not b.get("total")]
    assert len(rects) == 3
    first = [b for b in rects if b["x"] == rects[0]["x"]]
    assert math.isclose(sum(b["h"] for b in first), g["bottom"] - min(b["y"] for b in first), rel_tol=1e-3)


def test_extract_fans_out_over_candidates():
    from calculators.framework.registry import Chart
    chart = Chart(x="rate", y=("items.*.cost",), marker="pairs.*.at")
    body = {"items": [{"name": "A", "rate": [0, 0.5, 1]}, {"name": "B", "rate": 0.2}]}
    outputs = {"items": [{"name": "A", "cost": [3, 2, 1]}, {"name": "B", "cost": 2.5}],
               "pairs": [{"x": "A", "y": "B", "at": 0.25}, {"x": "B", "y": "A", "at": None}]}
    d = charts.extract(chart, body, outputs)
    assert [s.name for s in d.series] == ["A", "B"] and d.series[1].constant
    assert d.markers == [(0.25, "A vs B")]


def test_sweep_values_respect_bounds():
    assert charts.sweep_values(0.5, {"type": "number", "minimum": 0, "maximum": 1})[0] == 0.0
    assert charts.sweep_values(8192, {"type": "integer", "minimum": 1}) == [1024, 2048, 4096, 8192, 16384, 32768, 65536]
    assert charts.sweep_values(0, {"type": "number", "minimum": 0}) is None


def test_static_stylesheet_is_served(client):
    r = client.get("/static/site.css")
    assert r.status_code == 200 and "Noto Sans CJK" in r.text and "@media print" in r.text
    assert Path(__file__).resolve().parents[2].joinpath("api", "static", "site.css").exists()
