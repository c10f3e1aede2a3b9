"""`model_config`: every calculator that takes `model` also takes the model's Hugging Face config.json.

Each calculator runs twice, once with `model` = a store id and once with `model_config` = the config.json that
store record was imported from (found through `config_provenance` in models.yaml and checked by its sha256), and
the architecture-derived outputs must agree. The store keeps a published, rounded `params_total` / `params_active`
("8.2B"), while the config path counts parameters from the shapes (the parameter ledger), so outputs that are
functions of those counts are compared against the ledger instead (commented where that applies).
"""
from __future__ import annotations

import copy
import hashlib
import json
from functools import cache
from pathlib import Path

import pytest
import yaml

from calculators.framework.registry import REGISTRY
from calculators.framework.runner import RunError, solve
from tests.calculators.plain import compute  # outputs as plain values (sweeps are arrays in a Result)

DATA = Path(__file__).resolve().parents[2] / "knowledge" / "data"
CONFIGS = DATA / "model-configs"

#: the calculators of this change, plus the two that were wired first
MINE = ("checkpoint", "lora", "moe", "moe-placement", "quantization", "tp-overhead", "training-compute",
        "kv-eviction", "prefix-cache")
ALL = MINE + ("kv-cache", "weight-memory")

#: a minimal body per calculator (everything but the model)
BODIES = {
    "checkpoint": {"write_bandwidth_bytes_per_s": 8e9, "interval_s": [600, 3600], "mtbf_s": 86400},
    "lora": {"rank": [8, 16], "adapters": 100, "gpu_slots": 8},
    "moe": {"tokens": [1, 8, 32]},
    "moe-placement": {"ep": 16, "extra_replicas": [8]},
    "quantization": {"format": "int4_g128", "compare": ["bf16", "fp8"]},
    "tp-overhead": {"tokens": [1, 4096], "tp": 8, "link": "nvlink4"},
    "training-compute": {"tokens": 100e9, "sequence_tokens": 8192, "hardware": "h100-sxm", "devices": 64},
    "kv-eviction": {"tokens": [4096, 32768], "sink_tokens": 4, "recent_tokens": 2048, "heavy_hitter_fraction": 0.1},
    "prefix-cache": {"prefix_tokens": [2000, 8192], "requests": 100, "prefix_hit_rate": 0.9, "prefill_tokens_per_s": 5000},
    "kv-cache": {"tokens": [1, 8192], "requests": 4, "tp": 8},
    "weight-memory": {"devices": 8},
}

DENSE = ("qwen3-8b", "llama-3.1-70b")
MOE = ("qwen3-235b-a22b", "deepseek-v3")
MODELS = DENSE + MOE


@cache
def _provenance() -> dict[str, dict]:
    models = yaml.safe_load((DATA / "models.yaml").read_text(encoding="utf-8"))
    return {m["id"]: m["config_provenance"] for m in models if m.get("config_provenance")}


@cache
def _config_text(model_id: str) -> bytes:
    prov = _provenance()[model_id]
    path = CONFIGS / (prov["repository"].replace("/", "--") + "_config.json")
    raw = path.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == prov["file_sha256"], f"{path.name} is not the config {model_id} was imported from"
    return raw


def config(model_id: str) -> dict:
    """The config.json the store record of `model_id` was imported from (a fresh copy each call)."""
    return json.loads(_config_text(model_id))


def pair(name: str, model_id: str, body: dict | None = None, lookup=None) -> tuple[dict, dict]:
    """Outputs with `model` and with `model_config`."""
    body = BODIES[name] if body is None else body
    by_id = compute(name, {"model": model_id, **body}, lookup)[2].outputs
    by_config = compute(name, {"model_config": config(model_id), **body}, lookup)[2].outputs
    return by_id, by_config


def ledger_params(model_id: str, lookup) -> tuple[float, float]:
    """Total and active parameters counted from the store record's shapes (weight-memory's ledger)."""
    o = compute("weight-memory", {"model": model_id}, lookup)[2].outputs
    return float(o["params_total"]), float(o["params_active"])


def test_every_model_calculator_takes_model_config():
    takes_model = [n for n, c in REGISTRY.items() if "model" in c.request_model.model_fields]
    assert set(ALL) <= set(takes_model)
    for name in takes_model:
        props = REGISTRY[name].request_model.model_json_schema()["properties"]
        assert "model_config" in props, name
        assert props["model_config"]["type"] == "object", name


# ---------------------------------------------------------------- outputs agree in full

@pytest.mark.parametrize("model_id", MODELS)
@pytest.mark.parametrize("name", ["kv-cache", "weight-memory", "kv-eviction", "training-compute", "tp-overhead"])
def test_same_outputs_from_id_and_config(name, model_id, lookup):
    # everything these compute comes from shapes (KV layer groups, the parameter ledger, hidden size and layers)
    by_id, by_config = pair(name, model_id, lookup=lookup)
    assert by_config == by_id


@pytest.mark.parametrize("model_id", MODELS)
def test_kv_bytes_agree(model_id, lookup):
    by_id, by_config = pair("kv-cache", model_id, lookup=lookup)
    assert by_config["bytes_per_token"] == by_id["bytes_per_token"] > 0
    assert by_config["bytes_per_request"] == by_id["bytes_per_request"]
    assert by_config["per_device_bytes_per_request"] == by_id["per_device_bytes_per_request"]


def test_qwen3_8b_kv_from_its_config_is_144_kib_per_token(lookup):
    o = compute("kv-cache", {"model_config": config("qwen3-8b"), "tokens": 8192}, lookup)[2].outputs
    assert o["bytes_per_token"] == 147_456


@pytest.mark.parametrize("model_id", DENSE)
def test_lora_same_adapters(model_id, lookup):
    by_id, by_config = pair("lora", model_id, lookup=lookup)
    assert by_config == by_id
    by_id, by_config = pair("lora", model_id, {"rank": 16, "target_modules": ["q_proj", "v_proj"]}, lookup)
    assert by_config == by_id


@pytest.mark.parametrize("model_id", MOE)
@pytest.mark.parametrize("name", ["moe", "moe-placement"])
def test_moe_same_experts(name, model_id, lookup):
    by_id, by_config = pair(name, model_id, lookup=lookup)
    assert by_config == by_id
    assert by_config["moe_layers"] == (58 if model_id == "deepseek-v3" else 94)


@pytest.mark.parametrize("name", ["moe", "moe-placement"])
def test_moe_refuses_a_dense_config(name, lookup):
    with pytest.raises(RunError) as e:
        solve(name, {"model_config": config("qwen3-8b"), **BODIES[name]}, lookup)
    assert e.value.status == 422 and e.value.errors[0].field == "model_config"


# ---------------------------------------------------------------- parameter counts: published label vs ledger

@pytest.mark.parametrize("model_id", MODELS)
def test_checkpoint_counts_the_config_s_parameters(model_id, lookup):
    # The store's params_total is the published, rounded label; the config path counts the ledger from the same
    # shapes. So: the id path uses the label, the config path equals an explicit `params` = the ledger count.
    total, _ = ledger_params(model_id, lookup)
    body = BODIES["checkpoint"]
    by_id, by_config = pair("checkpoint", model_id, lookup=lookup)
    explicit = compute("checkpoint", {"params": total, **body}, lookup)[2].outputs
    assert by_config == explicit
    assert by_config["params"] == total
    assert by_id["params"] == lookup("model", model_id)["params_total"]["value"]
    assert by_config["checkpoint_bytes"] == 14 * total


@pytest.mark.parametrize("model_id", MODELS)
@pytest.mark.parametrize("which", ["total", "active"])
def test_quantization_sizes_the_ledger_count(model_id, which, lookup):
    # As for checkpoint: the config path is the ledger count, the id path the published label.
    total, active = ledger_params(model_id, lookup)
    n = int(total if which == "total" else active)
    body = {**BODIES["quantization"], "params": which}
    by_id, by_config = pair("quantization", model_id, body, lookup)
    explicit = compute("quantization", {"values": n, **BODIES["quantization"]}, lookup)[2].outputs
    assert by_config == explicit
    assert by_config["values"] == n
    assert by_id["values"] == lookup("model", model_id)[f"params_{which}"]["value"]
    assert by_config["effective_bits_per_value"] == by_id["effective_bits_per_value"]


@pytest.mark.parametrize("model_id", MODELS)
def test_prefix_cache_kv_and_attention_agree(model_id, lookup):
    by_id, by_config = pair("prefix-cache", model_id, lookup=lookup)
    # KV and the attention FLOPs come from shapes: identical
    shape_keys = [k for k in by_id if k.startswith(("kv_", "prefix_kv", "cache_entry", "state_")) or k in
                  ("prefix_tokens", "restore_point_tokens", "recompute_tokens", "expected_hits",
                   "prefill_flops_attention_per_hit")]
    assert "prefix_kv_bytes" in shape_keys and "prefill_flops_attention_per_hit" in shape_keys
    assert {k: by_config[k] for k in shape_keys} == {k: by_id[k] for k in shape_keys}
    # linear FLOPs are 2 · N · tokens, N the matrix parameters a token multiplies (no LM head), counted from the
    # shapes by id and by config alike: the same N training-compute counts
    n = compute("training-compute", {"model": model_id, "include_lm_head": False}, lookup)[2].outputs["params"]
    assert by_config["prefill_flops_linear_per_hit"] == [2.0 * n * t for t in by_config["restore_point_tokens"]]
    assert by_config == by_id
    _, active = ledger_params(model_id, lookup)
    # with the parameter count given explicitly, everything agrees
    body = {**BODIES["prefix-cache"], "params": active}
    by_id, by_config = pair("prefix-cache", model_id, body, lookup)
    assert by_config == by_id


# ---------------------------------------------------------------- refusals

@pytest.mark.parametrize("name", ALL)
def test_model_and_model_config_together_are_refused(name, lookup):
    with pytest.raises(RunError) as e:
        solve(name, {"model": "qwen3-8b", "model_config": config("qwen3-8b"), **BODIES[name]}, lookup)
    assert e.value.status == 422
    if name in MINE:
        assert [x.field for x in e.value.errors] == ["model_config"]
    else:  # weight-memory's model validator reports on the body, naming model_config in its message
        assert any("model_config" in x.field or "model_config" in x.message for x in e.value.errors)


def _unknown_layer_type() -> dict:
    cfg = config("qwen3-8b")
    cfg["layer_types"] = ["mystery_attention"] * cfg["num_hidden_layers"]
    return cfg


def _heterogeneous_blocks() -> dict:
    # refused by the importer: Nemotron-NAS per-layer block configs
    return json.loads((CONFIGS / "refused" / "nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json").read_text())


@pytest.mark.parametrize("make, key", [(_unknown_layer_type, "layer_types"), (_heterogeneous_blocks, "block_configs")],
                         ids=["layer_types", "block_configs"])
@pytest.mark.parametrize("name", ALL)
def test_unknown_layout_is_a_422_naming_model_config(name, make, key, lookup):
    with pytest.raises(RunError) as e:
        solve(name, {"model_config": make(), **BODIES[name]}, lookup)
    assert e.value.status == 422
    assert e.value.errors and e.value.errors[0].field.startswith("model_config")
    assert e.value.errors[0].field == f"model_config.{key}"


@pytest.mark.parametrize("name", ALL)
def test_model_config_must_be_an_object(name, lookup):
    with pytest.raises(RunError) as e:
        solve(name, {"model_config": ["not", "a", "config"], **BODIES[name]}, lookup)
    assert e.value.status == 422 and e.value.errors[0].field == "model_config"


def test_the_config_is_not_modified(lookup):
    cfg = config("deepseek-v3")
    before = copy.deepcopy(cfg)
    for name in ("kv-cache", "training-compute", "moe", "prefix-cache"):
        compute(name, {"model_config": cfg, **BODIES[name]}, lookup)
    assert cfg == before


# ---------------------------------------------------------------- layouts without a parameter ledger

def test_hybrid_config_sizes_kv_like_its_store_record(lookup):
    # Qwen3.5: linear-attention layers keep a fixed state; KV sizing needs no parameter count
    for name in ("kv-cache", "kv-eviction"):
        by_id, by_config = pair(name, "qwen3.5-27b", lookup=lookup)
        assert by_config == by_id


@pytest.mark.parametrize("name", ["checkpoint", "quantization", "training-compute"])
def test_a_parameter_count_the_config_cannot_give_is_a_422(name, lookup):
    # no ledger for hybrid linear attention, and a config.json publishes no parameter count
    with pytest.raises(RunError) as e:
        solve(name, {"model_config": config("qwen3.5-27b"), **BODIES[name]}, lookup)
    assert e.value.status == 422 and e.value.errors[0].field == "model_config"
    assert "no parameter count" in e.value.errors[0].message
