"""Hand-written hostile inputs: every one is a clear 4xx problem, never a 5xx, and nothing is read from disk."""
from __future__ import annotations

import pytest

from calculators.framework import MAX_LIST_LENGTH

KV = "/api/v1/calculators/kv-cache"


def problem(r, status):
    assert r.status_code == status, r.text[:500]
    assert r.headers["content-type"].startswith("application/problem+json")
    return r.json()


def test_deeply_nested_json_is_refused(client):
    body = "[" * 100_000 + "]" * 100_000
    r = client.post(KV, content=body, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500


def test_nested_objects_in_a_number_field(client):
    body = problem(client.post(KV, json={"model": "qwen3-8b", "tokens": {"a": {"b": {"c": [1]}}}}), 422)
    assert body["errors"][0]["field"] == "tokens"


def test_sweep_longer_than_the_documented_limit(client):
    body = problem(client.post(KV, json={"model": "qwen3-8b", "tokens": [1] * (MAX_LIST_LENGTH + 1)}), 422)
    assert body["errors"][0]["field"] == "tokens"


def test_sweep_at_the_limit_is_answered(client):
    r = client.post(KV, json={"model": "qwen3-8b", "tokens": list(range(1, MAX_LIST_LENGTH + 1))})
    assert r.status_code == 200
    assert len(r.json()["outputs"]["bytes_per_request"]) == MAX_LIST_LENGTH


def test_huge_numbers_are_bounded(client):
    body = problem(client.post(KV, json={"model": "qwen3-8b", "tokens": 10**30}), 422)
    assert body["errors"][0]["field"] == "tokens"


@pytest.mark.parametrize("ident", ["qwen3-8b%00", "ｑｗｅｎ３", "模型", "../../etc/passwd", "..%2F..%2Fetc%2Fpasswd",
                                   "/etc/passwd", "qwen3-8b; DROP TABLE model", "%00", "a" * 150])
def test_strange_ids_in_paths_are_404(client, ident):
    r = client.get(f"/api/v1/models/{ident}")
    assert r.status_code in (404, 422), r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "root:" not in r.text


@pytest.mark.parametrize("ident", ["../../etc/passwd", "模型", "qwen3-8b\u202e", "\ud7ff"])
def test_strange_ids_in_bodies_are_422_naming_the_field(client, ident):
    body = problem(client.post(KV, json={"model": ident, "tokens": 8}), 422)
    assert body["errors"][0]["field"] == "model"


def test_path_traversal_in_static_files(client):
    for url in ["/static/../pyproject.toml", "/static/%2e%2e/pyproject.toml", "/static/..%2f..%2fetc%2fpasswd"]:
        r = client.get(url)
        assert r.status_code in (404, 400), url
        assert "[project]" not in r.text and "root:" not in r.text


def test_wrong_content_type(client):
    r = client.post(KV, content="model=qwen3-8b&tokens=8", headers={"content-type": "application/x-www-form-urlencoded"})
    assert 400 <= r.status_code < 500


def test_empty_body(client):
    problem(client.post(KV, content=b"", headers={"content-type": "application/json"}), 422)


def test_batch_over_the_limit(client):
    item = {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": 8}}
    body = problem(client.post("/api/v1/calculators:batch", json={"requests": [item] * 1001}), 422)
    assert body["errors"][0]["field"] == "requests"


def test_batch_of_a_thousand_is_answered_in_order(client):
    items = [{"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": i + 1}} for i in range(1000)]
    res = client.post("/api/v1/calculators:batch", json={"requests": items}).json()["results"]
    assert [r["response"]["outputs"]["bytes_per_request"] for r in res] == [147456 * (i + 1) for i in range(1000)]


def test_security_headers_on_html_and_nosniff_on_json(client):
    html = client.get("/")
    assert html.headers["x-content-type-options"] == "nosniff"
    assert html.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in html.headers["content-security-policy"]
    assert client.get("/api/v1/models").headers["x-content-type-options"] == "nosniff"


def test_no_write_methods(client):
    for method in ("PUT", "DELETE", "PATCH"):
        r = client.request(method, "/api/v1/models/qwen3-8b")
        assert r.status_code == 405
        assert r.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize("calculator, body, field", [
    ("deployment-plan", {"model": "llama-3.1-70b", "arrival_rate_per_s": 10, "input_tokens": 2000, "output_tokens": 500,
                         "ttft_s": 2, "tpot_s": 0.05, "price_per_device_hour_usd": {"h100-sxm": True}},
     "price_per_device_hour_usd.h100-sxm"),
    ("kv-cache", {"architecture": {"layer_groups": [{"count": True, "streams": []}]}, "tokens": 8},
     "architecture.layer_groups[0].count"),
    ("edge-transfer", {"upload_bytes": [1, 2, False], "uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6},
     "upload_bytes[2]"),
])
def test_booleans_anywhere_a_number_goes_are_refused(client, calculator, body, field):
    body = problem(client.post(f"/api/v1/calculators/{calculator}", json=body), 422)
    assert any(e["field"] == field and e["type"] == "bool_not_number" for e in body["errors"]), body["errors"]


def test_a_misspelt_calculator_under_any_method(client):
    assert problem(client.post("/api/v1/calculators/kvcache", json={}), 404)["suggestions"][0] == "kv-cache"
    r = client.put("/api/v1/calculators/kvcache", json={})
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"GET", "HEAD", "POST"}


def test_the_server_opens_its_store_read_only(app, client):
    import duckdb

    store = app.state.store
    with pytest.raises(duckdb.Error) as err:
        store._sql("CREATE TABLE intruder (x INTEGER)")
    assert 'Cannot execute statement of type "CREATE"' in str(err.value)
    assert "attached in read-only mode" in str(err.value)
    assert isinstance(duckdb.__version__, str)


def test_counts_past_64_bits_answer_as_json_numbers_not_500(client):
    """orjson refuses integers beyond 64 bits; such answers (absurd but valid requests) come back as floats."""
    r = client.post("/api/v1/calculators/bank-conflicts", json={"cols": 405, "pitch_elements": [999498484784055], "rows": 4615})
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["outputs"], dict)
    r = client.post("/api/v1/calculators/vliw-cycles",
                    json={"engines": [{"engine": "0", "per_iteration": 114169}], "iterations": [117, 4479, 11256, 27392]})
    assert r.status_code == 200, r.text


def test_a_reference_rate_that_underflows_is_refused_by_name(client):
    r = client.post("/api/v1/calculators/scaling-efficiency", json={"points": [{"devices": 2, "rate_per_s": 5e-324}]})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "points[0].rate_per_s"


def test_the_encoder_turns_only_wide_integers_into_floats():
    from api.responses import dumps

    assert dumps({"a": 2**63 - 1, "b": [True, 2**70]}) == b'{"a":9223372036854775807,"b":[true,1.1805916207174113e+21]}'
