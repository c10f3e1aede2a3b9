"""The URL builder (`api.urls`): every kind of page, JSON twins, query editing, and calculator URLs
identical to the envelope's `explanation_url`."""
from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.service import explanation_url
from api.urls import Urls, urls, with_query


def test_pages_of_records():
    assert urls.home() == "/"
    assert urls.case("model-resource-accounting") == "/cases/model-resource-accounting"
    assert urls.derivation("model-resource-accounting", "kv-per-token") == "/cases/model-resource-accounting#kv-per-token"
    assert urls.hardware("h100-sxm") == "/hardware/h100-sxm"
    assert urls.model("qwen3-8b") == "/models/qwen3-8b"
    assert urls.framework("vllm") == "/frameworks/vllm"
    assert urls.source("qwen3-8b-config") == "/sources/qwen3-8b-config"
    # records without a page of their own are anchors on their list
    assert urls.link("nvlink4") == "/links#nvlink4"
    assert urls.price("p1") == "/prices#p1"
    assert urls.claim("c1") == "/claims#c1"
    assert urls.glossary_entry("eagle") == "/glossary#eagle"


def test_record_by_kind():
    assert urls.record("model", "qwen3-8b") == urls.model("qwen3-8b")
    assert urls.record("link", "nvlink4") == urls.link("nvlink4")
    assert urls.record("derivation", "some-case/some-step") == "/cases/some-case#some-step"
    assert urls.record("no-such-kind", "x y") == "/search?q=x+y"


def test_lists_with_filters():
    assert urls.cases() == "/cases"
    assert urls.hardware_list() == "/hardware"
    assert urls.models(family="qwen", sort="layers") == "/models?family=qwen&sort=layers"
    assert urls.listing("source", kind="datasheet", publisher=None) == "/sources?kind=datasheet"
    assert urls.hardware_list(vendor="NVIDIA", desc=True, limit=7) == "/hardware?vendor=NVIDIA&desc=true&limit=7"
    assert [urls.links(), urls.frameworks(), urls.prices(), urls.sources(), urls.claims(), urls.glossary(),
            urls.calculators(), urls.coverage()] == ["/links", "/frameworks", "/prices", "/sources", "/claims",
                                                      "/glossary", "/calculators", "/coverage"]


def test_search_and_fixed_pages():
    assert urls.search() == "/search"
    assert urls.search(q="KV cache") == "/search?q=KV+cache"
    assert urls.search(q="推测解码") == "/search?q=%E6%8E%A8%E6%B5%8B%E8%A7%A3%E7%A0%81"
    assert urls.search(q="cache", kind=["case", "glossary"]) == "/search?q=cache&kind=case&kind=glossary"
    assert urls.static("site.css") == "/static/site.css"
    assert (urls.docs(), urls.openapi(), urls.health()) == ("/docs", "/openapi.json", "/healthz")


def test_json_urls():
    assert urls.api_list("hardware", vendor="NVIDIA") == "/api/v1/hardware?vendor=NVIDIA"
    assert urls.api_list("case") == "/api/v1/cases"
    assert urls.api_item("model", "qwen3-8b") == "/api/v1/models/qwen3-8b"
    assert urls.api_item("derivation", "a-case/a-step") == "/api/v1/derivations/a-case/a-step"
    assert urls.api_item("calculator", "kv-cache") == "/api/v1/calculators/kv-cache"
    assert urls.api_coverage() == "/api/v1/coverage"
    assert urls.api_search(q="h100", limit=3) == "/api/v1/search?q=h100&limit=3"
    assert Urls(api="/api/v2").api_list("model") == "/api/v2/models"


def test_json_twin_keeps_the_query_without_blanks():
    assert urls.json_twin("/hardware", [("vendor", "NVIDIA"), ("scope", ""), ("limit", "7")]) == \
        "/api/v1/hardware?vendor=NVIDIA&limit=7"
    assert urls.json_twin("/search", [("q", "x"), ("kind", "case"), ("kind", "model")]) == \
        "/api/v1/search?q=x&kind=case&kind=model"
    assert urls.json_twin("/models/qwen3-8b") == "/api/v1/models/qwen3-8b"
    assert urls.page_of("/api/v1/models") == "/models"
    assert urls.page_of("/api/v1") == "/"


def test_with_changes_replaces_in_place_and_keeps_repeats():
    q = [("q", "cache"), ("kind", "case"), ("kind", "glossary"), ("offset", "20"), ("limit", "10")]
    assert urls.with_changes("/search", q, offset=30) == "/search?q=cache&kind=case&kind=glossary&offset=30&limit=10"
    assert urls.with_changes("/search", q, offset=None) == "/search?q=cache&kind=case&kind=glossary&limit=10"
    assert urls.with_changes("/hardware", [("vendor", "AMD")], sort="power_w", desc="true") == \
        "/hardware?vendor=AMD&sort=power_w&desc=true"
    assert urls.with_changes("/hardware", [("sort", "name"), ("desc", "true")], desc=None) == "/hardware?sort=name"
    assert with_query("/x", {"a": None, "b": "", "c": 0}) == "/x?c=0"


BODIES = [
    {"model": "qwen3-8b", "tokens": 8192},
    {"model": "qwen3-8b", "tokens": [1024, 2048, 4096], "kv_format": "fp8"},
    {"candidates": [{"name": "A", "prefix_hit_rate": 0.5}], "note": "ünïcode 推测 & = ? #"},
    {"x": 1e-9, "y": 1.5e20, "z": None, "flag": True},
    {},
]


@pytest.mark.parametrize("body", BODIES)
def test_calculator_url_is_the_envelopes_explanation_url(body):
    assert urls.calculator("kv-cache", body) == explanation_url("kv-cache", body)


def test_calculator_url_without_a_body_is_the_bare_page():
    assert urls.calculator("kv-cache") == "/calculators/kv-cache"


def test_calculator_url_escapes_exactly_as_urlencode():
    """The builder's fast escaping spells the same query as the standard library's `urlencode` (quote_plus)."""
    from urllib.parse import urlencode

    import orjson

    for body in BODIES:
        assert urls.calculator("kv-cache", body) == "/calculators/kv-cache?" + urlencode({"body": orjson.dumps(body).decode()})
        assert urls.calculator("kv-cache", body, format="json") == urls.calculator("kv-cache", body) + "&_format=json"
    assert urls.calculator("kv-cache") == "/calculators/kv-cache"
    assert urls.calculator("kv-cache", format="json") == "/calculators/kv-cache?_format=json"


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
                    | st.floats(allow_nan=False, allow_infinity=False),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=8)


@given(st.dictionaries(st.text(min_size=1, max_size=6), JSON, max_size=4))
def test_calculator_url_round_trips_any_body(body):
    url = urls.calculator("x", body)
    assert url == explanation_url("x", body)
    assert orjson.loads(parse_qs(urlsplit(url).query)["body"][0]) == orjson.loads(orjson.dumps(body))
