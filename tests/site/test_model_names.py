"""The site's model page answers the names calculators accept: `/models/meta-llama/Llama-3.1-8B-Instruct`, a case
variant or a name without -Instruct is a 308 to the canonical `/models/{id}`; unknown or ambiguous names stay 404."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("path, mid", [("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
                                       ("META-LLAMA/llama-3.1-8b-instruct", "llama-3.1-8b"),
                                       ("meta-llama/Llama-3.1-8B", "llama-3.1-8b"),
                                       ("Llama-3.1-8B-Instruct", "llama-3.1-8b"),
                                       ("LLAMA-3.1-8B", "llama-3.1-8b"),
                                       ("zai-org/GLM-5", "glm-5")])
def test_a_model_page_by_its_hugging_face_name_redirects_to_the_id(client, path, mid):
    r = client.get(f"/models/{path}", follow_redirects=False)
    assert r.status_code == 308, r.text
    assert r.headers["location"] == f"/models/{mid}"
    page = client.get(f"/models/{path}")
    assert page.status_code == 200 and page.url.path == f"/models/{mid}"


def test_the_id_itself_is_served_without_a_redirect(client):
    r = client.get("/models/llama-3.1-8b", follow_redirects=False)
    assert r.status_code == 200 and "Llama" in r.text


@pytest.mark.parametrize("path", ["meta-llama/Llama-9-1B-Instruct", "no-such-model"])
def test_an_unknown_name_is_still_the_404_page(client, path):
    r = client.get(f"/models/{path}", follow_redirects=False)
    assert r.status_code == 404


def test_an_ambiguous_name_is_a_404_not_a_guess(client, app):
    models = app.state.store.records["model"]
    models["llama-3.1-8b-twin"] = {**models["llama-3.1-8b"], "id": "llama-3.1-8b-twin"}
    try:
        r = client.get("/models/meta-llama/Meta-Llama-3.1-8B", follow_redirects=False)
    finally:
        del models["llama-3.1-8b-twin"]
    assert r.status_code == 404
