"""hf_config: real Hugging Face config.json files -> typed architecture records (layer groups checked from first principles).

The configs are verbatim copies kept in knowledge/data/model-configs/ (taken from the aiconfigurator-core 0.12.0
wheel on PyPI, aiconfigurator_core/model_configs/<ORG>--<REPO>_config.json; each file's sha256 is recorded in the
model's config_provenance). Every expectation below is computed in the test from the config's own numbers.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from calculators.framework import CalcInputError
from calculators.domain.hf_config import record_from_config

CONFIGS = Path(__file__).resolve().parents[2] / "knowledge" / "data" / "model-configs"


def load(repo: str) -> dict:
    """The config of ORG/REPO as published."""
    return json.loads((CONFIGS / f"{repo.replace('/', '--')}_config.json").read_bytes())


def v(rec: dict, *path: str):
    node = rec
    for p in path:
        node = node[p]
    return node["value"]


def shape(groups: list[dict]) -> list[tuple]:
    """Order-free comparison form: (count, ((dim, window, ratio), ...), state_elements)."""
    return sorted(((g["count"], tuple((s["dim"], s["window"], s["ratio"]) for s in g["streams"]), g["state_elements"])
                   for g in groups), key=repr)


# ------------------------------------------------------------------ dense GQA, explicit head_dim

def test_qwen3_8b_dense_gqa_with_explicit_head_dim():
    c = load("Qwen/Qwen3-8B")
    r = record_from_config(c)
    assert (r["kind"], r["attention"], r["weight_dtype"]) == ("dense", "gqa", "bf16")
    assert v(r, "head_dim") == c["head_dim"] == 128 and r["head_dim"]["locator"] == "head_dim"
    dim = 2 * c["num_key_value_heads"] * c["head_dim"]
    assert shape(r["layer_groups"]) == [(c["num_hidden_layers"], ((dim, None, 1),), 0)]
    assert r["layer_groups"][0]["kv_heads"] == c["num_key_value_heads"]
    assert v(r, "ffn_size") == c["intermediate_size"] and r["tie_word_embeddings"] is False


def test_llama_3_1_70b_derives_head_dim_and_says_so():
    c = load("meta-llama/Meta-Llama-3.1-70B")
    assert "head_dim" not in c
    r = record_from_config(c)
    hd = c["hidden_size"] // c["num_attention_heads"]
    assert v(r, "head_dim") == hd == 128
    assert r["head_dim"]["locator"] == "hidden_size / num_attention_heads" and "derived" in r["head_dim"]["note"]
    assert shape(r["layer_groups"]) == [(80, ((2 * c["num_key_value_heads"] * hd, None, 1),), 0)]


def test_mha_when_kv_heads_equal_heads_and_mqa_when_one():
    base = load("Qwen/Qwen3-0.6B")
    mha = {**base, "num_key_value_heads": base["num_attention_heads"]}
    assert record_from_config(mha)["attention"] == "mha"
    no_kv = {k: val for k, val in base.items() if k != "num_key_value_heads"}
    r = record_from_config(no_kv)
    assert r["attention"] == "mha" and v(r, "kv_heads") == base["num_attention_heads"]
    assert "no num_key_value_heads" in r["kv_heads"]["note"]
    assert record_from_config({**base, "num_key_value_heads": 1})["attention"] == "mqa"


# ------------------------------------------------------------------ MoE families

def test_mixtral_8x7b_moe_uses_intermediate_size_as_expert_width():
    c = load("mistralai/Mixtral-8x7B-v0.1")
    r = record_from_config(c)
    assert r["kind"] == "moe" and "ffn_size" not in r
    m = r["moe"]
    assert (v(m, "experts"), v(m, "experts_per_token"), v(m, "shared_experts"), v(m, "expert_ffn_size")) == \
        (c["num_local_experts"], c["num_experts_per_tok"], 0, c["intermediate_size"])
    assert shape(r["layer_groups"]) == [(32, ((2 * 8 * 128, None, 1),), 0)]


def test_qwen3_30b_a3b_moe_has_no_dense_layers():
    c = load("Qwen/Qwen3-30B-A3B")
    r = record_from_config(c)
    m = r["moe"]
    assert (v(m, "experts"), v(m, "experts_per_token"), v(m, "expert_ffn_size"), v(m, "dense_layers")) == (128, 8, 768, 0)
    assert "ffn_size" not in r  # intermediate_size is unused when every layer is sparse


def test_llama_4_maverick_interleaved_moe_and_chunked_attention():
    c = load("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    t = c["text_config"]
    r = record_from_config(c)
    L, step = t["num_hidden_layers"], t["interleave_moe_layer_step"]
    assert v(r, "moe", "dense_layers") == L - L // step == 24
    assert v(r, "ffn_size") == t["intermediate_size_mlp"] and v(r, "moe", "expert_ffn_size") == t["intermediate_size"]
    assert v(r, "moe", "shared_experts") == 1
    # default no_rope_layer_interval 4: every 4th layer NoPE (full), the rest chunked
    chunk, dim = t["attention_chunk_size"], 2 * t["num_key_value_heads"] * t["head_dim"]
    assert shape(r["layer_groups"]) == sorted([(L - L // 4, ((dim, chunk, 1),), 0), (L // 4, ((dim, None, 1),), 0)], key=repr)
    assert r["attention"] == "hybrid-chunked" and "upper bound" in r["layer_groups_provenance"]["note"]
    assert r["layers"]["locator"] == "text_config.num_hidden_layers"


# ------------------------------------------------------------------ MLA

def test_deepseek_v3_mla_latent_and_dense_prefix():
    c = load("deepseek-ai/DeepSeek-V3")
    r = record_from_config(c)
    lat = c["kv_lora_rank"] + c["qk_rope_head_dim"]
    assert r["attention"] == "mla" and shape(r["layer_groups"]) == [(c["num_hidden_layers"], ((lat, None, 1),), 0)]
    assert lat == 576
    assert v(r, "head_dim") == c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    assert v(r, "moe", "dense_layers") == c["first_k_dense_replace"] and v(r, "ffn_size") == c["intermediate_size"]
    assert v(r, "moe", "shared_experts") == c["n_shared_experts"]
    assert r["weight_dtype"] == "fp8"  # block FP8 although torch_dtype says bfloat16
    assert v(r, "num_nextn_predict_layers") == 1


def test_deepseek_v3_2_adds_the_dsa_indexer_key():
    c = load("deepseek-ai/DeepSeek-V3.2")
    r = record_from_config(c)
    lat = c["kv_lora_rank"] + c["qk_rope_head_dim"]
    assert r["attention"] == "mla-dsa"
    assert shape(r["layer_groups"]) == [(61, ((lat, None, 1), (c["index_head_dim"], None, 1)), 0)]
    assert v(r, "index_topk") == c["index_topk"]


def test_glm_5_mla_with_qk_head_dim_cross_check():
    c = load("zai-org/GLM-5")
    r = record_from_config(c)
    assert v(r, "head_dim") == c["qk_head_dim"] == c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    assert shape(r["layer_groups"]) == [(c["num_hidden_layers"], ((c["kv_lora_rank"] + c["qk_rope_head_dim"], None, 1),
                                                                  (c["index_head_dim"], None, 1)), 0)]
    bad = {**c, "qk_head_dim": 999}
    with pytest.raises(CalcInputError) as e:
        record_from_config(bad)
    assert e.value.loc == ("model_config.qk_head_dim",)


def test_kimi_k2_5_multimodal_text_config_mla_int4_experts():
    c = load("moonshotai/Kimi-K2.5")
    r = record_from_config(c)
    t = c["text_config"]
    assert r["layers"]["locator"] == "text_config.num_hidden_layers" and "text_config" in r["notes"]
    assert shape(r["layer_groups"]) == [(t["num_hidden_layers"], ((t["kv_lora_rank"] + t["qk_rope_head_dim"], None, 1),), 0)]
    assert r["weight_dtype"] == "mixed-int4-bf16"
    assert v(r, "moe", "experts") == t["n_routed_experts"] == 384


# ------------------------------------------------------------------ sliding windows and per-layer patterns

def test_gpt_oss_120b_alternating_sliding_window():
    c = load("openai/gpt-oss-120b")
    r = record_from_config(c)
    n_slide = c["layer_types"].count("sliding_attention")
    n_full = c["layer_types"].count("full_attention")
    dim = 2 * c["num_key_value_heads"] * c["head_dim"]
    assert (n_slide, n_full) == (18, 18)
    assert shape(r["layer_groups"]) == sorted([(n_slide, ((dim, c["sliding_window"], 1),), 0), (n_full, ((dim, None, 1),), 0)], key=repr)
    assert r["attention"] == "hybrid-swa" and r["weight_dtype"] == "mixed-mxfp4-bf16"
    assert v(r, "moe", "experts_per_token") == c["num_experts_per_tok"]


def test_gemma_4_global_layers_have_their_own_heads_and_share_k_and_v():
    c = load("google/gemma-4-26B-A4B")
    t = c["text_config"]
    r = record_from_config(c)
    lt = t["layer_types"]
    local = 2 * t["num_key_value_heads"] * t["head_dim"]
    glob = t["num_global_key_value_heads"] * t["global_head_dim"]  # attention_k_eq_v: one tensor
    assert shape(r["layer_groups"]) == sorted([(lt.count("sliding_attention"), ((local, t["sliding_window"], 1),), 0),
                                               (lt.count("full_attention"), ((glob, None, 1),), 0)], key=repr)
    full = next(g for g in r["layer_groups"] if g["streams"][0]["window"] is None)
    assert full["kv_heads"] == t["num_global_key_value_heads"] and full["streams"][0]["name"] == "k=v"
    assert v(r, "moe", "experts_per_token") == t["top_k_experts"] and v(r, "ffn_size") == t["intermediate_size"]


def test_gemma_3_sliding_window_pattern_every_sixth_layer_global():
    # Gemma 3 configs carry sliding_window_pattern instead of layer_types; derive it on a real Gemma-4 shape
    c = copy.deepcopy(load("google/gemma-4-26B-A4B"))
    t = c["text_config"]
    for k in ("layer_types", "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v"):
        t.pop(k)
    t["sliding_window_pattern"] = 6
    r = record_from_config(c)
    L = t["num_hidden_layers"]
    dim = 2 * t["num_key_value_heads"] * t["head_dim"]
    assert shape(r["layer_groups"]) == sorted([(L - L // 6, ((dim, 1024, 1),), 0), (L // 6, ((dim, None, 1),), 0)], key=repr)


def test_mimo_v2_flash_hybrid_pattern_with_separate_value_width():
    c = load("XiaomiMiMo/MiMo-V2-Flash")
    r = record_from_config(c)
    pat = c["hybrid_layer_pattern"]
    full = c["num_key_value_heads"] * (c["head_dim"] + c["v_head_dim"])
    swa = c["swa_num_key_value_heads"] * (c["swa_head_dim"] + c["swa_v_head_dim"])
    assert shape(r["layer_groups"]) == sorted([(pat.count(0), ((full, None, 1),), 0),
                                               (pat.count(1), ((swa, c["sliding_window"], 1),), 0)], key=repr)
    assert v(r, "moe", "dense_layers") == c["moe_layer_freq"].count(0) == 1


def test_step_3_7_layer_types_and_dense_prefix():
    c = load("stepfun-ai/Step-3.7-Flash")
    r = record_from_config(c)
    lt = c["layer_types"]
    dim = 2 * c["num_key_value_heads"] * c["head_dim"]
    assert shape(r["layer_groups"]) == sorted([(lt.count("full_attention"), ((dim, None, 1),), 0),
                                               (lt.count("sliding_attention"), ((dim, c["sliding_window"], 1),), 0)], key=repr)
    assert v(r, "moe", "dense_layers") == c["first_k_dense_replace"]


# ------------------------------------------------------------------ linear attention / SSM hybrids

def test_qwen3_5_35b_a3b_gated_deltanet_hybrid():
    c = load("Qwen/Qwen3.5-35B-A3B")
    t = c["text_config"]
    r = record_from_config(c)
    lt = t["layer_types"]
    state = t["linear_num_value_heads"] * t["linear_key_head_dim"] * t["linear_value_head_dim"]
    dim = 2 * t["num_key_value_heads"] * t["head_dim"]
    assert (lt.count("linear_attention"), lt.count("full_attention")) == (30, 10)
    assert shape(r["layer_groups"]) == sorted([(30, (), state), (10, ((dim, None, 1),), 0)], key=repr)
    assert r["attention"] == "hybrid-linear" and v(r, "linear_attention_heads") == t["linear_num_value_heads"]
    lin = next(g for g in r["layer_groups"] if g["state_elements"])
    assert lin["state_heads"] == t["linear_num_value_heads"]
    assert v(r, "moe", "shared_experts") == 1  # shared_expert_intermediate_size > 0


def test_qwen3_next_style_full_attention_interval_without_layer_types():
    c = copy.deepcopy(load("Qwen/Qwen3.5-27B"))
    t = c["text_config"]
    L, p = t["num_hidden_layers"], t["full_attention_interval"]
    t.pop("layer_types")
    r = record_from_config(c)
    state = t["linear_num_value_heads"] * t["linear_key_head_dim"] * t["linear_value_head_dim"]
    assert shape(r["layer_groups"]) == sorted([(L - L // p, (), state),
                                               (L // p, ((2 * t["num_key_value_heads"] * t["head_dim"], None, 1),), 0)], key=repr)


def test_kimi_k3_kda_and_mla_layers():
    c = load("moonshotai/Kimi-K3")
    t = c["text_config"]
    la = t["linear_attn_config"]
    r = record_from_config(c)
    assert shape(r["layer_groups"]) == sorted([(len(la["kda_layers"]), (), la["num_heads"] * la["head_dim"] ** 2),
                                               (len(la["full_attn_layers"]), ((t["kv_lora_rank"] + t["qk_rope_head_dim"], None, 1),), 0)],
                                              key=repr)
    assert r["attention"] == "kda-mla" and r["weight_dtype"] == "mixed-mxfp4-bf16"


def test_nemotron_3_nano_mamba_attention_moe_pattern():
    c = load("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    p = c["hybrid_override_pattern"]
    r = record_from_config(c)
    state = c["mamba_num_heads"] * c["mamba_head_dim"] * c["ssm_state_size"]
    assert shape(r["layer_groups"]) == sorted([(p.count("M"), (), state),
                                               (p.count("*"), ((2 * c["num_key_value_heads"] * c["head_dim"], None, 1),), 0)], key=repr)
    assert r["attention"] == "hybrid-mamba" and v(r, "moe", "experts") == c["n_routed_experts"]
    assert "shared expert width" in r["moe"]["shared_experts"]["note"]


def test_nemotron_h_56b_uses_attention_head_dim():
    c = load("nvidia/Nemotron-H-56B-Base-8K")
    r = record_from_config(c)
    p = c["hybrid_override_pattern"]
    assert r["kind"] == "dense" and v(r, "head_dim") == c["attention_head_dim"]
    assert shape(r["layer_groups"]) == sorted([(p.count("M"), (), c["mamba_num_heads"] * c["mamba_head_dim"] * c["ssm_state_size"]),
                                               (p.count("*"), ((2 * c["num_key_value_heads"] * c["attention_head_dim"], None, 1),), 0)],
                                              key=repr)


def test_deepseek_v4_flash_compressed_streams():
    c = load("deepseek-ai/DeepSeek-V4-Flash")
    r = record_from_config(c)
    L = c["num_hidden_layers"]
    ratios = c["compress_ratios"][:L]
    hd, w, ih = c["head_dim"], c["sliding_window"], c["index_head_dim"]
    expect = []
    if ratios.count(0):
        expect.append((ratios.count(0), ((hd, w, 1),), 0))
    expect.append((ratios.count(4), ((hd, w, 1), (hd, None, 4), (ih, None, 4)), 0))
    expect.append((ratios.count(128), ((hd, w, 1), (hd, None, 128)), 0))
    assert shape(r["layer_groups"]) == sorted(expect, key=repr)
    assert r["weight_dtype"] == "mixed-fp8-fp4"


def test_qwen3_vl_text_config_is_used_and_named():
    c = load("Qwen/Qwen3-VL-8B-Instruct")
    r = record_from_config(c)
    t = c["text_config"]
    assert shape(r["layer_groups"]) == [(t["num_hidden_layers"], ((2 * t["num_key_value_heads"] * t["head_dim"], None, 1),), 0)]
    assert all(r[f]["locator"].startswith("text_config.") for f in ("layers", "heads", "kv_heads", "head_dim"))


# ------------------------------------------------------------------ refusals: the key is named, nothing is guessed

@pytest.mark.parametrize("repo, mutate, loc", [
    ("openai/gpt-oss-20b", lambda c: c["layer_types"].__setitem__(3, "local_attention"), "model_config.layer_types"),
    ("openai/gpt-oss-20b", lambda c: c.__setitem__("layer_types", c["layer_types"][:-1]), "model_config.layer_types"),
    ("Qwen/Qwen3-8B", lambda c: c.__setitem__("num_key_value_heads", 7.5), "model_config.num_key_value_heads"),
    ("Qwen/Qwen3-8B", lambda c: c.__setitem__("num_hidden_layers", "36"), "model_config.num_hidden_layers"),
    ("Qwen/Qwen3-8B", lambda c: c.__setitem__("num_key_value_heads", 5), "model_config.num_key_value_heads"),
    ("Qwen/Qwen3-8B", lambda c: c.__setitem__("torch_dtype", "float8_e5m2"), "model_config.torch_dtype"),
    ("Qwen/Qwen3-8B", lambda c: [c.pop(k) for k in ("num_hidden_layers", "num_attention_heads")], "model_config.model_type"),
    ("Qwen/Qwen3-8B", lambda c: c.__setitem__("quantization_config", {"quant_method": "awq"}), "model_config.quantization_config.quant_method"),
    ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
     lambda c: c.__setitem__("hybrid_override_pattern", c["hybrid_override_pattern"][:-1] + "X"), "model_config.hybrid_override_pattern"),
    ("Qwen/Qwen3.5-35B-A3B", lambda c: c["text_config"].__setitem__("linear_num_value_heads", None),
     "model_config.text_config.linear_num_value_heads"),
    ("moonshotai/Kimi-K3", lambda c: c["text_config"]["linear_attn_config"]["kda_layers"].pop(),
     "model_config.text_config.linear_attn_config.kda_layers"),
    ("deepseek-ai/DeepSeek-V4-Flash", lambda c: c["compress_ratios"].__setitem__(2, 1), "model_config.compress_ratios"),
    ("deepseek-ai/DeepSeek-V4-Flash", lambda c: c["compress_ratios"].pop(), "model_config.compress_ratios"),
    ("mistralai/Mixtral-8x7B-v0.1", lambda c: c.pop("num_experts_per_tok"), "model_config.num_experts_per_tok"),
])
def test_uninterpretable_keys_are_refused_with_their_name(repo, mutate, loc):
    c = copy.deepcopy(load(repo))
    mutate(c)
    with pytest.raises(CalcInputError) as e:
        record_from_config(c)
    assert e.value.loc == (loc,) and e.value.status == 422


@pytest.mark.parametrize("file, loc", [
    ("MiniMaxAI--MiniMax-M3_config.json", "model_config.sparse_attention_config"),
    ("nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json", "model_config.block_configs"),
    ("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16_config.json", "model_config.layers_block_type"),
])
def test_real_configs_with_unmodelled_layouts_are_refused(file, loc):
    """Verbatim configs kept in model-configs/refused/ (same wheel): block-sparse index cache, per-layer block lists."""
    c = json.loads((CONFIGS / "refused" / file).read_bytes())
    with pytest.raises(CalcInputError) as e:
        record_from_config(c)
    assert e.value.loc == (loc,)


def test_unsupported_layouts_are_refused():
    c = copy.deepcopy(load("Qwen/Qwen3-8B"))
    c["block_configs"] = [{"attention": {"n_heads_in_group": 8}}] * c["num_hidden_layers"]
    with pytest.raises(CalcInputError) as e:
        record_from_config(c)
    assert e.value.loc == ("model_config.block_configs",)
    c = copy.deepcopy(load("Qwen/Qwen3-8B"))
    c["sparse_attention_config"] = {"use_sparse_attention": True, "sparse_index_dim": 128}
    with pytest.raises(CalcInputError) as e:
        record_from_config(c, loc="body.model_config")
    assert e.value.loc == ("body.model_config.sparse_attention_config",)
    with pytest.raises(CalcInputError) as e:
        record_from_config({"model_type": "rwkv", "num_hidden_layers": 24, "hidden_size": 2048})
    assert e.value.loc == ("model_config.model_type",) and "rwkv" in e.value.message
    with pytest.raises(CalcInputError) as e:
        record_from_config(["not", "an", "object"])  # type: ignore[arg-type]
    assert e.value.loc == ("model_config",)


def test_qwen2_style_use_sliding_window_false_means_no_window():
    c = {**load("Qwen/Qwen3-8B"), "sliding_window": 131072, "use_sliding_window": False, "max_window_layers": 28}
    r = record_from_config(c)
    assert "sliding_window" not in r and all(s["window"] is None for g in r["layer_groups"] for s in g["streams"])
    on = {**c, "use_sliding_window": True}
    r = record_from_config(on)
    assert shape(r["layer_groups"]) == sorted([(28, ((2048, None, 1),), 0), (8, ((2048, 131072, 1),), 0)], key=repr)
