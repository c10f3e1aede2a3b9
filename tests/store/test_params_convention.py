"""Parameter counts say what they count: every model with params_total has params_convention; the counts without
embeddings and the DSA indexer's weights are recomputed here from each record's own shapes (not read back), and
the importer writes the same fields it would write today (models.yaml is what `--params-extras` produces)."""
from __future__ import annotations

import copy

import pytest
import yaml

from knowledge import model_import as MI

MODELS = {m["id"]: m for m in yaml.safe_load(MI.MODELS.read_text(encoding="utf-8"))}


def v(rec, *path):
    node = rec
    for p in path:
        node = node[p]
    return int(node["value"])


def test_every_count_says_its_convention():
    for mid, m in MODELS.items():
        if "params_total" not in m:
            assert "params_convention" not in m, mid
            continue
        c = m["params_convention"]
        assert set(c) - {"note"} == {"basis", *MI.CONVENTION_KEYS}, mid
        computed = m["params_total"]["locator"].startswith("computed from config")
        assert c["basis"] == ("computed" if computed else "published"), mid
        if computed:     # the ledger counts embeddings and head, and none of the auxiliary modules
            assert c["embeddings"] == "included", mid
            assert all(c[k] in ("excluded", "none") for k in ("indexer", "mtp", "vision")), mid
        assert (c["indexer"] == "none") == (m.get("attention") != "mla-dsa"), mid
        assert (c["mtp"] == "none") == (not m.get("num_nextn_predict_layers", {}).get("value")), mid


def test_models_yaml_holds_what_the_importer_computes_now():
    for mid, m in MODELS.items():
        bare = {k: val for k, val in m.items() if k not in MI.PARAMS_EXTRA_KEYS}
        assert MI.params_extras(copy.deepcopy(bare)) == {k: m[k] for k in MI.PARAMS_EXTRA_KEYS if k in m}, mid


def test_without_embeddings_is_the_count_less_the_embedding_table_and_head():
    checked = 0
    for mid, m in MODELS.items():
        if "params_total_without_embeddings" not in m:
            continue
        emb = v(m, "vocab_size") * v(m, "hidden_size")
        heads = 1 if m.get("tie_word_embeddings") else 2
        if m["params_convention"]["basis"] == "computed":
            assert v(m, "params_total") - v(m, "params_total_without_embeddings") == heads * emb, mid
            assert v(m, "params_active") - v(m, "params_active_without_embeddings") == heads * emb, mid
        checked += 1
    assert checked >= 40


@pytest.mark.parametrize("mid", ["glm-5", "glm-5.1", "glm-5.2", "glm-5.3", "glm-5-nvfp4", "glm-5.3-nvfp4", "glm-5-fp8",
                                 "deepseek-v3.2", "deepseek-v3.2-nvfp4"])
def test_the_dsa_indexer_weights_are_stored_and_said(mid):
    m = MODELS[mid]
    d, heads, hd, q = v(m, "hidden_size"), v(m, "index_n_heads"), v(m, "index_head_dim"), v(m, "mla", "q_lora_rank")
    per_layer = q * heads * hd + d * hd + 2 * hd + d * heads
    assert v(m, "params_indexer") == v(m, "layers") * per_layer
    assert m["params_convention"]["indexer"] == "excluded" and "not in params_total" in m["params_indexer"]["note"]
    if mid.startswith("glm-5"):
        assert v(m, "params_indexer") == 731_008_512          # the ~0.73 B the fact check found missing


@pytest.mark.parametrize("mid", ["minimax-m2.5", "minimax-m2.7", "minimax-m2.5-nvfp4"])
def test_minimax_active_counts_embeddings_and_the_published_10b_does_not(mid):
    m = MODELS[mid]
    assert m["params_convention"]["embeddings"] == "included"
    assert round(v(m, "params_active") / 1e9, 2) == 11.03
    assert round(v(m, "params_active_without_embeddings") / 1e9, 1) == 9.8
    assert "10B" in m["params_convention"]["note"]


def test_qwen3_card_non_embedding_figures_match_the_ledger():
    """The Qwen3 cards print both counts: the ledger without embeddings reproduces their non-embedding figure."""
    card = {"qwen3-8b": 6.95, "qwen3-14b": 13.2, "qwen3-32b": 31.2, "qwen3-1.7b": 1.4}
    for mid, non_embedding in card.items():
        m = MODELS[mid]
        assert m["params_convention"] == {**m["params_convention"], "basis": "published", "embeddings": "included"}
        got = v(m, "params_total_without_embeddings") / 1e9
        assert abs(got - non_embedding) < 0.05 * non_embedding + 0.005, (mid, got)


def test_the_block_writer_replaces_rather_than_duplicates(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(MI.MODELS.read_text(encoding="utf-8"), encoding="utf-8")
    assert MI.write_params_extras(path) == []                  # already written: nothing changes
    text = path.read_text(encoding="utf-8").replace("  params_indexer:", "  params_indexer_old:", 1)
    path.write_text(MI._without_keys(text, ("params_indexer_old",)), encoding="utf-8")
    changed = MI.write_params_extras(path)
    assert len(changed) == 1 and path.read_text(encoding="utf-8") == MI.MODELS.read_text(encoding="utf-8")
