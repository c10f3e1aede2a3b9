"""Every JSON route, with good and bad input; problem+json errors name the field or the list endpoint."""
from __future__ import annotations

import re

import pytest

LISTS = ["/api/v1/cases", "/api/v1/hardware", "/api/v1/links", "/api/v1/models", "/api/v1/frameworks",
         "/api/v1/sources", "/api/v1/prices", "/api/v1/derivations", "/api/v1/glossary", "/api/v1/claims"]


def is_problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


def test_healthz(client):
    r = client.get("/healthz")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and re.fullmatch(r"[0-9a-f]{64}", body["content_hash"])
    assert body["counts"]["case"] == 71


@pytest.mark.parametrize("url", LISTS)
def test_lists_page_and_count(client, url):
    r = client.get(url, params={"limit": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) >= {"items", "total", "limit", "offset", "next"}
    assert len(body["items"]) <= 2 and body["limit"] == 2
    if body["total"] > 2:
        assert "offset=2" in body["next"]
        second = client.get(url, params={"limit": 2, "offset": 2}).json()
        assert second["items"] and second["items"][0] != body["items"][0]


@pytest.mark.parametrize("url", LISTS)
@pytest.mark.parametrize("params, field", [({"limit": 0}, "limit"), ({"limit": 5000}, "limit"),
                                           ({"offset": -1}, "offset"), ({"limit": "ten"}, "limit")])
def test_lists_reject_bad_paging(client, url, params, field):
    body = is_problem(client.get(url, params=params), 422)
    assert [e["field"] for e in body["errors"]] == [field]
    assert body["errors"][0]["in"] == "query"


def test_cases_are_the_71_of_the_index(client):
    body = client.get("/api/v1/cases", params={"limit": 100}).json()
    assert body["total"] == 71
    assert body["items"][0]["slug"] == "model-resource-accounting"
    assert all(c["source_url"].startswith("https://github.com/bojieli/ai-infra-book/blob/") for c in body["items"])


def test_cases_filter_by_chapter(client):
    body = client.get("/api/v1/cases", params={"chapter": 8, "limit": 100}).json()
    assert body["total"] >= 9
    assert all(8 in c["cited_chapters"] for c in body["items"])
    assert "speculative-execution" in {c["slug"] for c in body["items"]}


def test_case_detail_has_derivations_and_related(client):
    body = client.get("/api/v1/cases/model-resource-accounting").json()
    assert body["title_zh"] == "从模型结构计算容量、工作量与访问量"
    assert len(body["derivations"]) >= 10
    assert all(d["case"] == "model-resource-accounting" for d in body["derivations"])
    assert all(set(r) == {"slug", "title_zh", "title_en", "url"} for r in body["related_cases"])


def test_model_with_the_source_of_every_number(client):
    m = client.get("/api/v1/models/qwen3-8b").json()
    assert m["layers"]["value"] == 36 and m["kv_heads"]["value"] == 8 and m["head_dim"]["value"] == 128
    for field in ("layers", "hidden_size", "heads", "kv_heads", "head_dim", "vocab_size"):
        fact = m[field]
        assert fact["source"] and fact["locator"] and fact["source_url"].startswith("http"), field


def test_hardware_with_sources_and_peaks(client):
    h = client.get("/api/v1/hardware/h100-sxm").json()
    assert h["memory_bytes"]["value"] == pytest.approx(80e9, rel=0.1)
    assert h["memory_bytes"]["source_url"].startswith("http")
    assert h["peaks"] and {p["sparsity"] for p in h["peaks"]} <= {"dense", "structured", "unspecified"}
    assert all(p["flop_per_s"]["source"] and p["flop_per_s"]["locator"] for p in h["peaks"])


def test_filters(client):
    qwen = client.get("/api/v1/models", params={"family": "qwen", "limit": 100}).json()
    assert qwen["total"] >= 6 and all(m["family"] == "qwen" for m in qwen["items"])
    nv = client.get("/api/v1/hardware", params={"vendor": "nvidia", "limit": 100}).json()
    assert nv["total"] >= 10 and all(h["vendor"] == "NVIDIA" for h in nv["items"])
    by_mem = client.get("/api/v1/hardware", params={"sort": "memory_bytes", "desc": True, "limit": 5}).json()["items"]
    mems = [h["memory_bytes"]["value"] for h in by_mem if h.get("memory_bytes")]
    assert mems == sorted(mems, reverse=True)


def test_bad_enum_filter_names_field(client):
    body = is_problem(client.get("/api/v1/models", params={"sort": "colour"}), 422)
    assert body["errors"][0]["field"] == "sort"


@pytest.mark.parametrize("url, endpoint", [
    ("/api/v1/models/no-such-model", "/api/v1/models"), ("/api/v1/hardware/h999", "/api/v1/hardware"),
    ("/api/v1/cases/no-such-case", "/api/v1/cases"), ("/api/v1/links/nvlink99", "/api/v1/links"),
    ("/api/v1/frameworks/nope", "/api/v1/frameworks"), ("/api/v1/sources/nope", "/api/v1/sources"),
    ("/api/v1/prices/nope", "/api/v1/prices"), ("/api/v1/derivations/a/b", "/api/v1/derivations"),
    ("/api/v1/calculators/nope", "/api/v1/calculators"), ("/api/v1/glossary/nope", "/api/v1/glossary"),
    ("/api/v1/claims/nope", "/api/v1/claims"),
])
def test_unknown_ids_are_404_naming_the_list(client, url, endpoint):
    body = is_problem(client.get(url), 404)
    assert endpoint in body["detail"]


def test_every_list_item_can_be_fetched(client):
    for url, key in [("/api/v1/hardware", "id"), ("/api/v1/models", "id"), ("/api/v1/links", "id"),
                     ("/api/v1/frameworks", "id"), ("/api/v1/cases", "slug")]:
        first = client.get(url, params={"limit": 1}).json()["items"][0]
        assert client.get(f"{url}/{first[key]}").status_code == 200


def test_source_lists_the_facts_citing_it(client):
    m = client.get("/api/v1/models/qwen3-8b").json()
    src = client.get(f"/api/v1/sources/{m['layers']['source']}").json()
    assert src["url"].startswith("http")
    assert any(f["record_id"] == "qwen3-8b" and f["field"] == "layers" for f in src["facts"])


def test_search_in_chinese_finds_speculative_case(client):
    body = client.get("/api/v1/search", params={"q": "推测解码"}).json()
    top = [h["id"] for h in body["items"][:3]]
    assert "speculative-execution" in top, body["items"][:5]


def test_search_english_is_ranked(client):
    body = client.get("/api/v1/search", params={"q": "multi lora serving adapters"}).json()
    assert body["items"][0]["id"] == "multi-lora-serving"
    scores = [h["score"] for h in body["items"]]
    assert scores == sorted(scores, reverse=True)
    only_models = client.get("/api/v1/search", params={"q": "qwen3", "kind": "model"}).json()
    assert only_models["items"] and all(h["kind"] == "model" for h in only_models["items"])


def test_search_needs_a_query(client):
    body = is_problem(client.get("/api/v1/search"), 422)
    assert body["errors"][0]["field"] == "q"


def test_unknown_route_is_a_problem(client):
    is_problem(client.get("/api/v1/nothing-here"), 404)


def test_cors_allows_any_origin_without_credentials(client):
    r = client.get("/api/v1/models", headers={"Origin": "https://example.org"})
    assert r.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in r.headers


def test_openapi_operation_ids_read_as_function_names(client):
    spec = client.get("/openapi.json").json()
    ops = [op for path in spec["paths"].values() for op in path.values()]
    ids = [op["operationId"] for op in ops]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", i) for i in ids), ids
    assert {"list_models", "get_model", "list_hardware", "get_hardware", "list_cases", "get_case", "search",
            "kv_cache", "parallel_split", "lora", "routing_cost", "edge_transfer"} <= set(ids)
    assert all(op.get("summary") and op.get("description") for op in ops)


def test_openapi_schema_names_are_unique(client):
    """Generated clients need one model per name: no Input/Output splits, no module-path names."""
    comps = client.get("/openapi.json").json()["components"]["schemas"]
    titles = [v.get("title", k) for k, v in comps.items()]
    assert len(titles) == len(set(titles)), sorted(t for t in titles if titles.count(t) > 1)
    assert not [k for k in comps if k.endswith(("-Input", "-Output")) or "__" in k]
