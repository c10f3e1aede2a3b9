"""Errors that say how to fix (issue 13): every 4xx names the field or the list, and what was probably meant."""
from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from calculators.framework.registry import REGISTRY

KV = "/api/v1/calculators/kv-cache"


def problem(r, status):
    assert r.status_code == status, r.text[:800]
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["status"] == status and body["title"] and body["detail"]
    return body


def error_of(body, field):
    found = [e for e in body["errors"] if e["field"] == field]
    assert found, body["errors"]
    return found[0]


# --------------------------------------------------------------------------- unknown names and ids

def test_post_to_a_misspelt_calculator_is_404_with_did_you_mean(client):
    body = problem(client.post("/api/v1/calculators/kv-cach", json={"model": "qwen3-8b", "tokens": 8}), 404)
    assert body["suggestions"][0] == "kv-cache"
    assert body["see"] == "/api/v1/calculators" and "/api/v1/calculators" in body["detail"]
    assert "Did you mean 'kv-cache'" in body["detail"]


def test_get_of_a_misspelt_calculator_suggests_too(client):
    body = problem(client.get("/api/v1/calculators/lora-fleet"), 404)
    assert "lora" in body["suggestions"]


@pytest.mark.parametrize("url, expected", [
    ("/api/v1/hardware/h100", "h100-sxm"), ("/api/v1/models/qwen3-8", "qwen3-8b"),
    ("/api/v1/cases/speculative-executio", "speculative-execution"),
])
def test_unknown_record_ids_are_404_with_close_matches(client, url, expected):
    body = problem(client.get(url), 404)
    assert expected in body["suggestions"]
    assert expected in body["detail"] and body["see"] in body["detail"]


def test_unknown_id_with_nothing_close_has_no_suggestions(client):
    body = problem(client.get("/api/v1/models/zzzzzzzzzz"), 404)
    assert "suggestions" not in body and "/api/v1/models" in body["detail"]


@pytest.mark.parametrize("request_body, field, expected", [
    ({"model": "qwen3-8", "tokens": 8}, "model", "qwen3-8b"),
    ({"model": "qwen3-8b", "tokens": 8, "hardware": "h100"}, "hardware", "h100-sxm"),
])
def test_unknown_ids_in_a_request_are_422_with_suggestions(client, request_body, field, expected):
    body = problem(client.post(KV, json=request_body), 422)
    err = error_of(body, field)
    assert expected in err["suggestions"] and err["type"] == "unknown_id"
    assert f"Did you mean '{expected}'" in err["message"], err["message"]


def test_unknown_field_names_the_nearest_real_one(client):
    body = problem(client.post(KV, json={"model": "qwen3-8b", "tokns": 8}), 422)
    err = error_of(body, "tokns")
    assert err["type"] == "extra_forbidden" and err["suggestions"] == ["tokens"]
    assert "Did you mean 'tokens'" in err["message"]


def test_unknown_nested_field_names_the_fields_of_its_object(client):
    arch = {"layer_groups": [{"count": 2, "streams": [], "kv_hedas": 8}]}
    body = problem(client.post(KV, json={"architecture": arch, "tokens": 8}), 422)
    err = error_of(body, "architecture.layer_groups[0].kv_hedas")
    assert "kv_heads" in err["suggestions"]


def test_a_bad_choice_lists_the_allowed_and_the_nearest(client):
    body = problem(client.post(KV, json={"model": "qwen3-8b", "tokens": 8, "kv_format": "fp9"}), 422)
    assert [e["field"] for e in body["errors"]] == ["kv_format"]     # not also `kv_format.FormatSpec`
    err = body["errors"][0]
    assert "fp8" in err["suggestions"] and "'nvfp4'" in err["message"] and "Did you mean" in err["message"]


def test_a_bad_enum_in_a_query_suggests(client):
    body = problem(client.get("/api/v1/models", params={"sort": "layer"}), 422)
    err = error_of(body, "sort")
    assert err["in"] == "query" and "layers" in err["suggestions"]


# --------------------------------------------------------------------------- 405 always says what is allowed

@pytest.mark.parametrize("method, url, allowed", [
    ("PUT", "/api/v1/models/qwen3-8b", {"GET", "HEAD"}), ("POST", "/healthz", {"GET", "HEAD"}),
    ("PUT", KV, {"GET", "HEAD", "POST"}), ("DELETE", "/api/v1/calculators:batch", {"POST"}),
    ("POST", "/static/style.css", {"GET", "HEAD"}), ("DELETE", "/mcp", {"POST"}),
    ("PUT", "/calculators/kv-cache", {"GET", "HEAD"}),
])
def test_every_405_carries_allow(client, method, url, allowed):
    """`Allow` lists every method that works, HEAD included wherever GET is (HeadMiddleware answers it), and each
    listed method really is answered (no 405)."""
    r = client.request(method, url)
    assert r.status_code == 405, r.text
    listed = [m.strip() for m in r.headers["allow"].split(",")]
    assert set(listed) == allowed and len(listed) == len(set(listed))
    for m in listed:
        if m != "POST":
            assert client.request(m, url).status_code != 405, (m, url)


# --------------------------------------------------------------------------- JSON syntax

def test_malformed_json_says_line_and_column(client):
    raw = '{"model": "qwen3-8b",\n  "tokens": 8,}'
    body = problem(client.post(KV, content=raw, headers={"content-type": "application/json"}), 422)
    assert [e["field"] for e in body["errors"]] == ["body"]
    msg = body["errors"][0]["message"]
    assert msg.startswith("JSON syntax error at line 2, column 15:"), msg
    assert "line 2, column 15" in body["detail"]


def test_malformed_json_in_a_batch_is_the_same_problem(client):
    body = problem(client.post("/api/v1/calculators:batch", content='{"requests": [}',
                               headers={"content-type": "application/json"}), 422)
    assert body["errors"][0]["field"] == "body" and "line 1, column 15" in body["errors"][0]["message"]


# --------------------------------------------------------------------------- booleans are not numbers

@pytest.mark.parametrize("request_body, field", [
    ({"model": "qwen3-8b", "tokens": 8, "requests": True}, "requests"),
    ({"model": "qwen3-8b", "tokens": False}, "tokens"),
    ({"model": "qwen3-8b", "tokens": [8, True, 16]}, "tokens[1]"),
])
def test_booleans_for_numbers_are_refused(client, request_body, field):
    body = problem(client.post(KV, json=request_body), 422)
    err = error_of(body, field)
    assert err["type"] == "bool_not_number" and "number" in err["message"]


def test_whole_floats_for_ints_stay_accepted(client):
    assert client.post(KV, json={"model": "qwen3-8b", "tokens": 8.0}).status_code == 200


def _numeric_field(calc):
    """A top-level request field of the example that holds a number (not a bool), if any."""
    for key, value in calc.example.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return key
    return None


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if _numeric_field(REGISTRY[n])))
def test_every_calculator_refuses_true_for_a_number(client, name):
    calc = REGISTRY[name]
    field = _numeric_field(calc)
    body = problem(client.post(f"/api/v1/calculators/{name}", json={**calc.example, field: True}), 422)
    assert error_of(body, field)["type"] == "bool_not_number"


def _bool_fields(model: type[BaseModel]) -> list[str]:
    return [n for n, f in model.model_fields.items() if f.annotation is bool
            or bool in typing.get_args(f.annotation)]


@pytest.mark.parametrize("name", sorted(n for n in REGISTRY if _bool_fields(REGISTRY[n].request_model)))
def test_real_boolean_fields_still_take_booleans(client, name):
    calc = REGISTRY[name]
    field = _bool_fields(calc.request_model)[0]
    info = calc.request_model.model_fields[field]
    r = client.post(f"/api/v1/calculators/{name}", json={**calc.example, (info.alias or field): True})
    assert not any(e.get("type") == "bool_not_number" for e in (r.json().get("errors") or [])), r.text


# --------------------------------------------------------------------------- batch and site

def test_batch_items_carry_the_same_field_errors_with_suggestions(client):
    r = client.post("/api/v1/calculators:batch", json={"requests": [
        {"calculator": "kv-cache", "request": {"model": "qwen3-8", "tokens": 8}},
        {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokns": 8}},
        {"calculator": "kv-cache", "request": {"model": "qwen3-8b", "tokens": True}},
        {"calculator": "kv-cach", "request": {}},
    ]})
    assert r.status_code == 200
    res = r.json()["results"]
    assert [x["status"] for x in res] == [422, 422, 422, 404]
    assert "qwen3-8b" in error_of(res[0]["problem"], "model")["suggestions"]
    assert error_of(res[1]["problem"], "tokns")["suggestions"] == ["tokens"]
    assert error_of(res[2]["problem"], "tokens")["type"] == "bool_not_number"
    assert res[3]["problem"]["suggestions"][0] == "kv-cache" and res[3]["problem"]["see"] == "/api/v1/calculators"


def test_calculator_page_shows_field_errors_with_suggestions(client):
    r = client.get("/calculators/kv-cache", params={"body": '{"model": "qwen3-8", "tokens": 8}'})
    assert r.status_code == 422
    assert "Did you mean" in r.text and "qwen3-8b" in r.text
    r = client.get("/calculators/kv-cache", params={"body": '{"model": "qwen3-8b", "tokns": 8}'})
    assert r.status_code == 422 and "tokns" in r.text and "Did you mean" in r.text


# --------------------------------------------------------------------------- the OpenAPI document

@pytest.fixture(scope="module")
def spec(client):
    return client.get("/openapi.json").json()


def test_every_operation_declares_problem_responses(spec):
    for path, item in spec["paths"].items():
        for method, op in item.items():
            for status in ("400", "404", "413", "422"):
                resp = op["responses"].get(status)
                assert resp, (method, path, status)
                assert resp["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}
    problem_schema = spec["components"]["schemas"]["Problem"]
    assert {"type", "title", "status", "detail", "errors", "suggestions"} <= set(problem_schema["properties"])
    field_error = spec["components"]["schemas"]["FieldError"]
    assert {"field", "in", "message", "type", "suggestions"} <= set(field_error["properties"])
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_typed_outputs_in_the_calculator_operations(spec):
    typed = [c for c in REGISTRY.values() if c.outputs_model is not None]
    assert typed
    schemas = spec["components"]["schemas"]
    for calc in typed:
        ref = spec["paths"][f"/api/v1/calculators/{calc.name}"]["post"]["responses"]["200"]["content"][
            "application/json"]["schema"]["$ref"]
        env = schemas[ref.rsplit("/", 1)[1]]
        assert env["properties"]["outputs"]["$ref"].endswith("/" + calc.outputs_model.__name__), calc.name
        assert env["properties"]["outputs"] != {"type": "object"}


def test_choices_are_named_schemas_not_inline_enums(spec):
    schemas = spec["components"]["schemas"]
    inline = []

    def walk(node, where):
        if isinstance(node, dict):
            if "enum" in node and len(node["enum"]) > 1 and where.count("/") > 0:
                inline.append(where)
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}/{i}")

    for name, schema in schemas.items():
        for prop, sub in (schema.get("properties") or {}).items():
            walk(sub, f"{name}/{prop}")
    assert not inline, inline[:10]
    assert schemas["FormatName"]["enum"][:2] == ["fp32", "bf16"]
    kv = schemas["KVCacheRequest"]["properties"]["kv_format"]
    assert {"$ref": "#/components/schemas/FormatName"} in kv["anyOf"]


# ---------------------------------------------------------------- the site's 404 page and the search kind filter

@pytest.mark.parametrize("path,first", [("/hardware/h100", "/hardware/h100-sxm"),
                                        ("/calculators/kv-cach", "/calculators/kv-cache"),
                                        ("/models/llama-70b", "/models/llama-3.1-70b")])
def test_html_404_links_the_closest_ids(client, path, first):
    r = client.get(path, headers={"accept": "text/html"})
    assert r.status_code == 404
    mean = r.text[r.text.index("Did you mean"):]
    assert mean.index(f'href="{first}"') < mean.index("?</p>")


def test_search_can_be_restricted_to_calculators(client):
    r = client.get("/api/v1/search", params={"q": "KV cache", "kind": "calculator"})
    assert r.status_code == 200
    items = r.json()["items"]
    assert items and {i["kind"] for i in items} == {"calculator"}
    assert items[0]["id"] == "kv-cache"
