"""/api/v1/models/{id} answers a model by the names calculators accept (case, Hugging Face repository, -Instruct),
naming its id in Content-Location; a calculator's answer says how it read the name; ambiguous names are a 422
problem listing the candidates; unknown names stay 404."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("name, mid", [("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"), ("LLAMA-3.1-8B", "llama-3.1-8b"),
                                       ("Llama-3.1-8B", "llama-3.1-8b"), ("meta-llama%2FLlama-3.3-70B-Instruct", "llama-3.3-70b"),
                                       ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b")])
def test_a_model_by_its_hugging_face_name(client, name, mid):
    r = client.get(f"/api/v1/models/{name}")
    assert r.status_code == 200, r.text
    assert r.json()["id"] == mid
    assert r.headers["content-location"] == f"/api/v1/models/{mid}"
    exact = client.get(f"/api/v1/models/{mid}")
    assert exact.status_code == 200 and "content-location" not in exact.headers
    assert exact.json() == r.json()


def test_an_unknown_name_is_a_404_problem(client):
    r = client.get("/api/v1/models/meta-llama/Llama-9-1B-Instruct")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")


def test_an_ambiguous_name_is_a_422_listing_the_candidates(client, app):
    store = app.state.store
    models = store.records["model"]
    twin = {**models["llama-3.1-8b"], "id": "llama-3.1-8b-twin"}
    models[twin["id"]] = twin
    try:
        r = client.get("/api/v1/models/meta-llama/Meta-Llama-3.1-8B")
    finally:
        del models[twin["id"]]
    assert r.status_code == 422, r.text
    body = r.json()
    assert r.headers["content-type"].startswith("application/problem+json")
    assert body["candidates"] == ["llama-3.1-8b", "llama-3.1-8b-twin"]
    assert body["errors"][0]["field"] == "model_id" and body["errors"][0]["suggestions"] == body["candidates"]


def test_a_calculation_says_how_it_read_the_name(client):
    r = client.post("/api/v1/calculators/kv-cache", json={"model": "meta-llama/Llama-3.3-70B-Instruct", "tokens": 4096})
    assert r.status_code == 200, r.text
    body = r.json()
    assert "model 'meta-llama/Llama-3.3-70B-Instruct' read as llama-3.3-70b" in body["assumptions"]
    same = client.post("/api/v1/calculators/kv-cache", json={"model": "llama-3.3-70b", "tokens": 4096}).json()
    assert same["outputs"] == body["outputs"]
