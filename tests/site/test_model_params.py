"""The model page shows both parameter counts (as stored, and without embeddings and output head), the DSA indexer's
weights where there are some, and what the stored counts include."""
from __future__ import annotations

import re


def _params(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-param="([a-z_]+)">\s*<span class="fact" data-value="([0-9.e+]+)"', html))


def test_glm5_page_shows_both_counts_the_indexer_and_the_convention(client, app):
    m = app.state.store.get("model", "glm-5")
    html = client.get("/models/glm-5").text
    got = _params(html)
    for key in ("params_total", "params_active", "params_total_without_embeddings", "params_active_without_embeddings",
                "params_indexer"):
        assert float(got[key]) == float(m[key]["value"]), key
    conv = re.search(r"<p class=\"small\" data-convention>(.*?)</p>", html, re.S).group(1)
    assert "DSA indexer <strong>excluded</strong>" in conv and "embeddings and output head <strong>included</strong>" in conv


def test_minimax_page_names_the_published_convention(client):
    html = client.get("/models/minimax-m2.5").text
    assert "params_active_without_embeddings" in html and "10B" in html


def test_a_model_without_counts_has_no_parameter_table(client, app, monkeypatch):
    """Every stored model has counts now (issue #26), so the page is shown a record without them."""
    import api.site.facts as facts

    store = app.state.store
    ident = "glm-5"
    assert 'id="params-h"' in client.get(f"/models/{ident}").text
    real = facts._record

    def bare(st, kind, i):
        rec = real(st, kind, i)
        return {k: v for k, v in rec.items() if not k.startswith("params")} if (kind, i) == ("model", ident) else rec

    monkeypatch.setattr(facts, "_record", bare)
    resp = client.get(f"/models/{ident}?uncached=1")        # another URL: the page cache holds the first answer
    assert resp.status_code == 200 and store.get("model", ident)["name"] in resp.text
    assert 'id="params-h"' not in resp.text
