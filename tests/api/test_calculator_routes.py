"""Calculator endpoints: the envelope, validation as problem+json naming the field, Markdown, batch."""
from __future__ import annotations

import pytest

from calculators.framework.registry import REGISTRY

FIVE = ["kv-cache", "parallel-split", "lora", "routing-cost", "edge-transfer"]


def test_the_five_named_calculators_are_registered(client):
    names = {c["name"] for c in client.get("/api/v1/calculators").json()}
    assert set(FIVE) <= names
    assert len(names) >= 12


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_example_answers_with_the_envelope(client, name):
    r = client.post(f"/api/v1/calculators/{name}", json=REGISTRY[name].example)
    assert r.status_code == 200, r.text
    env = r.json()
    assert env["calculator"] == name
    assert set(env) == {"calculator", "headline", "inputs", "outputs", "steps", "assumptions", "cases", "explanation_url"}
    assert list(env)[:2] == ["calculator", "headline"]
    assert len(env["headline"]) > 20 and env["headline"].rstrip().endswith((".", "?", "!")), env["headline"]
    assert env["outputs"] and env["steps"] and env["assumptions"]
    assert all(set(s) == {"label", "formula", "substituted", "value", "unit"} for s in env["steps"])
    assert env["explanation_url"].startswith(f"/calculators/{name}?")
    assert "sources" in env["inputs"]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_calculator_rejects_unknown_fields(client, name):
    r = client.post(f"/api/v1/calculators/{name}", json={**REGISTRY[name].example, "no_such_field": 1})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "no_such_field" in {e["field"] for e in r.json()["errors"]}


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_calculator_answers_markdown(client, name):
    r = client.post(f"/api/v1/calculators/{name}", json=REGISTRY[name].example, headers={"Accept": "text/markdown"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    assert "## Steps" in r.text and "| step |" in r.text


def test_kv_cache_resolves_a_model_and_names_sources(client):
    env = client.post("/api/v1/calculators/kv-cache", json={"model": "qwen3-8b", "tokens": 8192}).json()
    assert env["outputs"]["bytes_per_token"] == 147456
    assert env["outputs"]["bytes_per_request"] == 1207959552
    assert any(s["record"] == "qwen3-8b" and s["source_url"] for s in env["inputs"]["sources"])


def test_unknown_model_id_is_422_naming_the_field(client):
    r = client.post("/api/v1/calculators/kv-cache", json={"model": "no-such-model", "tokens": 8})
    assert r.status_code == 422
    assert r.json()["errors"][0]["field"] == "model"
    assert "/api/v1/models" in r.json()["detail"]


@pytest.mark.parametrize("body, field", [
    ({"upload_bytes": -1, "uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6}, "upload_bytes"),
    ({"upload_bytes": 1, "uplink_bits_per_s": 0, "downlink_bits_per_s": 1e6}, "uplink_bits_per_s"),
    ({"upload_bytes": "lots", "uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6}, "upload_bytes"),
    ({"uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6}, "upload_bytes"),
    ({"upload_bytes": 1, "uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6, "rounds": 1.5}, "rounds"),
    ({"upload_bytes": [1, -2], "uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6}, "upload_bytes[1]"),
])
def test_bad_input_names_the_field(client, body, field):
    r = client.post("/api/v1/calculators/edge-transfer", json=body)
    assert r.status_code == 422, r.text
    assert field in {e["field"] for e in r.json()["errors"]}


def test_nan_and_infinity_are_refused(client):
    for raw in ('{"upload_bytes": NaN, "uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6}',
                '{"upload_bytes": Infinity, "uplink_bits_per_s": 1e6, "downlink_bits_per_s": 1e6}'):
        r = client.post("/api/v1/calculators/edge-transfer", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text


def test_malformed_json_is_422(client):
    r = client.post("/api/v1/calculators/edge-transfer", content="{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422


def test_oversized_body_is_413(client):
    r = client.post("/api/v1/calculators/edge-transfer", content=b"[" + b"1," * 3_000_000 + b"1]",
                    headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.headers["content-type"].startswith("application/problem+json")


def test_batch_answers_each_item_in_order(client):
    body = {"requests": [
        {"calculator": "edge-transfer", "request": REGISTRY["edge-transfer"].example},
        {"calculator": "edge-transfer", "request": {"upload_bytes": -1}},
        {"calculator": "no-such", "request": {}},
    ]}
    r = client.post("/api/v1/calculators:batch", json=body)
    assert r.status_code == 200
    res = r.json()["results"]
    assert [x["status"] for x in res] == [200, 422, 404]
    assert res[0]["response"]["outputs"]["total_s"] == pytest.approx(12.8)
    assert res[1]["problem"]["errors"][0]["field"] == "upload_bytes"


def _body_of(url: str) -> dict:
    import json
    from urllib.parse import parse_qs, urlsplit

    return json.loads(parse_qs(urlsplit(url).query)["body"][0])


def test_a_short_sweep_links_its_whole_request(client):
    body = {"model": "qwen3-8b", "tokens": [1024, 2048, 4096]}
    env = client.post("/api/v1/calculators/kv-cache", json=body).json()
    assert _body_of(env["explanation_url"])["tokens"] == [1024, 2048, 4096]


def test_a_long_sweep_links_the_page_of_its_first_point_not_an_unusable_url(client):
    """A 20,000-point sweep would need a ~150 kB URL (beyond what servers and proxies take in a request line, our
    own 64 KiB head limit included): the link explains the first point, which the headline and steps describe,
    and the page answers."""
    from api.envelope import EXPLANATION_URL_MAX
    from api.urls import urls

    calculator_url = urls.calculator

    tokens = list(range(1000, 1000 + 20_000 * 7, 7))
    body = {"model": "qwen3-8b", "tokens": tokens, "requests": 4}
    assert len(calculator_url("kv-cache", body)) > 10 * EXPLANATION_URL_MAX
    env = client.post("/api/v1/calculators/kv-cache", json=body).json()
    url = env["explanation_url"]
    assert len(url) <= EXPLANATION_URL_MAX
    assert _body_of(url) == {"model": "qwen3-8b", "tokens": 1000, "requests": 4}
    page = client.get(url)
    assert page.status_code == 200
    first = client.post("/api/v1/calculators/kv-cache", json=_body_of(url)).json()
    assert env["headline"] == first["headline"].rstrip(".") + " at the first of 20,000 points."


def test_first_point_takes_the_first_value_of_swept_fields_only_and_leaves_the_request_alone():
    from api.envelope import first_point

    body = {"tokens": [1, 2], "operation": {"m": [3, 4], "k": 5}, "segments": [7, 8]}
    got = first_point(body, ("tokens", "operation.m", "operation.count", "absent.field"))
    assert got == {"tokens": 1, "operation": {"m": 3, "k": 5}, "segments": [7, 8]}
    assert body == {"tokens": [1, 2], "operation": {"m": [3, 4], "k": 5}, "segments": [7, 8]}


def test_the_envelope_has_one_declaration(client):
    """Every calculator's answer has exactly the fields of `api.schemas.Envelope` and validates against it, and MCP's
    outputSchema is that model's schema."""
    from api.mcp_server import ENVELOPE_SCHEMA
    from api.schemas import Envelope
    from calculators.framework.registry import REGISTRY

    assert list(ENVELOPE_SCHEMA["properties"]) == list(Envelope.model_fields) == ENVELOPE_SCHEMA["required"]
    for name, calc in REGISTRY.items():
        env = client.post(f"/api/v1/calculators/{name}", json=calc.example).json()
        assert list(env) == list(Envelope.model_fields), name
        Envelope.model_validate(env)
