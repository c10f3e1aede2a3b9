"""GET /api/v1/benchmarks and /api/v1/benchmarks/{id} over the real store, and the MCP tool find_benchmarks (called
in process): every filter keeps exactly the points the store's records say it should, pages chain, unknown ids are
404s with suggestions, bad filters 422s naming the field."""
from __future__ import annotations

from collections import Counter

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from api.mcp_server import _Tools, build_tools

API = "/api/v1/benchmarks"


@pytest.fixture(scope="module")
def points(client):
    return client.app.state.store.all("benchmark")


def _all(client, query: str = "") -> dict:
    body = client.get(f"{API}?limit=1000{'&' + query if query else ''}").json()
    assert body["total"] == len(body["items"])
    return body


def test_the_list_holds_every_point_with_a_resolving_source(client, points):
    body = _all(client)
    assert body["total"] == len(points) >= 1
    assert [p["id"] for p in body["items"]] == [p["id"] for p in points]
    for src in {p["source"] for p in points}:
        assert client.get(f"/api/v1/sources/{src}").status_code == 200, src


def test_points_are_listed_grouped_by_model_and_hardware(client, points):
    keys = [(p["model_hf"], p["hardware_name"]) for p in _all(client)["items"]]
    seen, last = set(), None
    for k in keys:   # a group is contiguous: once left, never met again
        if k != last:
            assert k not in seen, k
            seen.add(k)
            last = k


def _expect(points, pred) -> list[str]:
    return [p["id"] for p in points if pred(p)]


def test_model_filter_takes_a_store_id_or_the_hugging_face_name_case_insensitively(client, points):
    with_id = next(p for p in points if p.get("model"))
    got = [p["id"] for p in _all(client, f"model={with_id['model'].upper()}")["items"]]
    assert got == _expect(points, lambda p: p.get("model") == with_id["model"]) and got
    hf = points[-1]["model_hf"]
    got = [p["id"] for p in _all(client, f"model={hf.swapcase()}")["items"]]
    assert got == _expect(points, lambda p: p["model_hf"].lower() == hf.lower()) and got


def test_hardware_filter_takes_a_store_id_or_the_published_name(client, points):
    with_id = next(p for p in points if p.get("hardware"))
    got = [p["id"] for p in _all(client, f"hardware={with_id['hardware']}")["items"]]
    assert got == _expect(points, lambda p: p.get("hardware") == with_id["hardware"]) and got
    name = points[0]["hardware_name"]
    got = [p["id"] for p in _all(client, "hardware=" + name.lower().replace(" ", "+"))["items"]]
    assert got == _expect(points, lambda p: p["hardware_name"].lower() == name.lower()) and got


@pytest.mark.parametrize("field", ["framework", "source", "devices", "input_tokens", "output_tokens", "weight_format"])
def test_exact_filters_keep_exactly_the_matching_points(client, points, field):
    value, _ = Counter(p[field] for p in points if p.get(field) is not None).most_common(1)[0]
    shown = int(value) if isinstance(value, float) and value.is_integer() else value
    got = [p["id"] for p in _all(client, f"{field}={shown}")["items"]]
    assert got == _expect(points, lambda p: p.get(field) == value) and got


def test_concurrency_filter_reads_the_closed_loop_load(client, points):
    value, _ = Counter(p["load"]["concurrency"] for p in points if p["load"].get("concurrency")).most_common(1)[0]
    got = [p["id"] for p in _all(client, f"concurrency={value}")["items"]]
    assert got == _expect(points, lambda p: p["load"].get("concurrency") == value) and got


def test_filters_combine(client, points):
    p0 = next(p for p in points if p.get("model") and p["load"].get("concurrency"))
    got = [p["id"] for p in _all(client, f"model={p0['model']}&devices={p0['devices']}&framework={p0['framework']}"
                                          f"&concurrency={p0['load']['concurrency']}")["items"]]
    assert p0["id"] in got
    assert got == _expect(points, lambda p: (p.get("model"), p["devices"], p["framework"], p["load"].get("concurrency"))
                          == (p0["model"], p0["devices"], p0["framework"], p0["load"]["concurrency"]))


def test_pages_chain_and_cover_the_list(client, points):
    ids, url = [], f"{API}?limit=7"
    while url:
        body = client.get(url).json()
        assert body["total"] == len(points)
        ids += [p["id"] for p in body["items"]]
        url = body["next"]
    assert ids == [p["id"] for p in points]


def test_sort_orders_by_the_figure(client, points):
    items = client.get(f"{API}?sort=tpot_median_s&limit=1000").json()["items"]
    values = [p["measured"]["tpot_s"]["median"] for p in items if (p["measured"].get("tpot_s") or {}).get("median")]
    assert len(values) >= 2 and values == sorted(values)
    desc = client.get(f"{API}?sort=tpot_median_s&desc=true&limit=1000").json()["items"]
    assert desc[0]["measured"]["tpot_s"]["median"] == max(values)


def test_one_point_is_its_record_and_unknown_ids_are_404s_with_suggestions(client, points):
    p = points[len(points) // 2]
    r = client.get(f"{API}/{p['id']}")
    assert r.status_code == 200 and r.json() == p
    r = client.get(f"{API}/{p['id']}x")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")
    assert p["id"] in (r.json().get("suggestions") or []) and r.json()["see"] == API


@pytest.mark.parametrize("query, field", [("framework=vlm", "framework"), ("devices=0", "devices"),
                                          ("concurrency=many", "concurrency"), ("input_tokens=-5", "input_tokens"),
                                          ("limit=0", "limit"), ("sort=speed", "sort"), ("model=" + "m" * 201, "model")])
def test_a_bad_filter_is_a_422_naming_it(client, query, field):
    r = client.get(f"{API}?{query}")
    assert r.status_code == 422 and r.headers["content-type"].startswith("application/problem+json")
    assert [e["field"] for e in r.json()["errors"]] == [field]


def test_both_routes_are_in_openapi_with_response_schemas(client):
    spec = client.get("/openapi.json").json()
    listing = spec["paths"][API]["get"]
    item = spec["paths"][API + "/{benchmark_id}"]["get"]
    assert {p["name"] for p in listing["parameters"]} >= {"model", "hardware", "framework", "source", "devices",
                                                          "input_tokens", "output_tokens", "concurrency", "limit", "offset"}
    assert item["responses"]["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Benchmark"}
    assert "404" in item["responses"] and "422" in listing["responses"]
    assert {"measured", "load", "source", "url", "locator"} <= set(spec["components"]["schemas"]["Benchmark"]["properties"])


# --------------------------------------------------------------------------- MCP: find_benchmarks

@pytest.fixture(scope="module")
def tools(client):
    return _Tools(client.app)


def test_find_benchmarks_is_listed_with_a_compact_schema(client):
    tool = {t.name: t for t in build_tools(client.app)}["find_benchmarks"]
    props = tool.parameters["properties"]
    assert set(props) == {"model", "hardware", "framework", "limit"}
    assert props["framework"]["enum"] == ["vllm", "sglang", "trtllm", "other"]
    assert tool.annotations.read_only_hint is True


def test_find_benchmarks_answers_a_table_of_the_points_with_their_sources(tools, points):
    p0 = next(p for p in points if p.get("model") and p.get("hardware"))
    want = [p["id"] for p in points if p.get("model") == p0["model"] and p.get("hardware") == p0["hardware"]]
    result = tools.find_benchmarks({"model": p0["model"], "hardware": p0["hardware"], "limit": 50})
    data, text = result.structured_content, result.content[0].text
    assert data["total"] >= len(want) and [r["id"] for r in data["items"]][:len(want)] == want
    assert "| point | framework |" in text
    for r in data["items"]:
        assert r["id"] in text and r["url"] in text and r["source"] in text


def test_find_benchmarks_reads_part_of_a_name_and_ranks_exact_matches_first(tools, points):
    hf = points[0]["model_hf"]
    part = hf.split("/")[-1][:8].lower()
    items = tools.find_benchmarks({"model": part, "limit": 50}).structured_content["items"]
    assert items and all(part.replace("-", "").replace(".", "") in
                         (r["model_hf"] + (r.get("model") or "")).lower().replace("-", "").replace(".", "") for r in items)
    exact = tools.find_benchmarks({"model": hf, "limit": 3}).structured_content["items"]
    assert all(r["model_hf"] == hf for r in exact)


def test_find_benchmarks_limits_and_filters_by_framework(tools, points):
    fw, n = Counter(p["framework"] for p in points).most_common(1)[0]
    data = tools.find_benchmarks({"framework": fw, "limit": 2}).structured_content
    assert data["total"] == n and len(data["items"]) == min(2, n)


def test_find_benchmarks_says_what_is_stored_when_nothing_matches(tools):
    result = tools.find_benchmarks({"model": "no-such-model-zz"})
    assert result.structured_content["total"] == 0
    assert "no point for model 'no-such-model-zz'" in result.content[0].text


@pytest.mark.parametrize("args, field", [({"modle": "x"}, "modle"), ({"framework": "vlm"}, "framework"),
                                         ({"limit": 0}, "limit")])
def test_find_benchmarks_refuses_bad_arguments_naming_them(tools, args, field):
    with pytest.raises(ToolError, match=f"find_benchmarks.*{field}"):
        tools.find_benchmarks(args)
