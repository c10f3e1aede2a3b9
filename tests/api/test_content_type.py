"""Bodies of the JSON API are JSON: another Content-Type is a 415 that says which header to send (issue #28: `curl -d`
sends a form, which got a puzzling 422 "body: Input should be a valid dictionary")."""
from __future__ import annotations

import pytest

KV = "/api/v1/calculators/kv-cache"
BODY = '{"model": "qwen3-8b", "tokens": 8192}'


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; "
                                          "boundary=x", "text/json", "application/jsonx"])
def test_a_body_that_is_not_json_is_415_saying_what_to_send(client, content_type):
    r = client.post(KV, content=BODY, headers={"content-type": content_type})
    assert r.status_code == 415 and r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["status"] == 415 and problem["type"].endswith("/unsupported-media-type")
    assert "Content-Type: application/json" in problem["detail"]
    assert "-H 'Content-Type: application/json'" in problem["detail"]
    assert content_type in problem["detail"] and problem["instance"] == KV


def test_batch_refuses_a_form_too(client):
    r = client.post("/api/v1/calculators:batch", content='{"requests": []}',
                    headers={"content-type": "application/x-www-form-urlencoded"})
    assert r.status_code == 415 and "application/json" in r.json()["detail"]


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON",
                                          "application/merge-patch+json", None])
def test_json_media_types_and_a_missing_content_type_are_read_as_json(client, content_type):
    headers = {"content-type": content_type} if content_type else {}
    r = client.post(KV, content=BODY, headers=headers)
    assert r.status_code == 200, r.text[:500]
    assert r.json()["calculator"] == "kv-cache"


def test_no_body_is_the_missing_body_422_whatever_the_type(client):
    r = client.post(KV, content=b"", headers={"content-type": "text/plain"})
    assert r.status_code == 422 and r.json()["errors"][0]["field"] == "body"


def test_the_openapi_document_declares_415_on_every_operation_with_a_body(client):
    spec = client.get("/openapi.json").json()
    with_body = without = 0
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            declared = op["responses"].get("415")
            if "requestBody" in op:
                with_body += 1
                assert declared, f"{method} {path}"
                assert declared["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}
                assert "Content-Type: application/json" in declared["description"]
            else:
                without += 1
                assert declared is None, f"{method} {path}"
    assert with_body > 10 and without > 10
