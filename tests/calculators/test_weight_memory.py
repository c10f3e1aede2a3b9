"""weight-memory: the book's Qwen3 ledgers, label-based footprints, tensor lists, and invariants."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import GIB, CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

QWEN3_8B = {"layers": 36, "hidden_size": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "ffn_size": 12288,
            "vocab_size": 151936}

FAKE_MODELS = {
    "fake-dense": {"id": "fake-dense", "attention": "gqa", "tie_word_embeddings": False,
                   **{k: {"value": v, "source": "s", "locator": k} for k, v in QWEN3_8B.items()},
                   "params_total": {"value": 8.2e9, "source": "s", "locator": "card"}},
    "fake-hybrid": {"id": "fake-hybrid", "attention": "csa-hca",
                    "params_total": {"value": 284e9, "source": "s", "locator": "card"}},
}
FAKE_HW = {"gpu80": {"id": "gpu80", "memory_bytes": {"value": 80e9, "source": "s", "locator": "t"}}}


def fake_lookup(kind, ident):
    return {"model": FAKE_MODELS, "hardware": FAKE_HW}[kind][ident]


def calc(body, lookup=no_lookup):
    return run("weight-memory", body, lookup)[2]


def test_qwen3_8b_core_matrices_bf16():
    o = calc({"architecture": QWEN3_8B, "include_embeddings": False, "include_norms": False}).outputs
    assert o["bytes_total"] == 13_891_534_848
    assert o["params_total"] == 6_945_767_424
    assert o["core_matrix_bytes"] == 13_891_534_848
    assert o["per_layer"]["attention_params"] == 41_943_040
    assert o["per_layer"]["dense_ffn_params"] == 150_994_944
    assert o["per_layer"]["forward_flops_per_token"] == 385_875_968


def test_qwen3_8b_logical_params_with_qk_norm_and_untied_head():
    o = calc({"architecture": {**QWEN3_8B, "qk_norm": True}}).outputs
    assert o["params_total"] == 8_190_735_360
    assert o["bytes_total"] == 16_381_470_720
    assert o["breakdown"]["lm_head"]["params"] == 151936 * 4096


def test_model_id_is_cited():
    r = calc({"model": "fake-dense", "include_embeddings": False, "include_norms": False}, fake_lookup)
    assert r.outputs["bytes_total"] == 13_891_534_848
    assert any(s["field"] == "layers" and s["record"] == "fake-dense" for s in r.sources)


def test_tied_embeddings_counted_once():
    untied = calc({"architecture": QWEN3_8B}).outputs["params_total"]
    tied = calc({"architecture": {**QWEN3_8B, "tie_word_embeddings": True}}).outputs["params_total"]
    assert untied - tied == 151936 * 4096


def test_label_based_235b_on_eight_80gb_cards():
    # the book's nominal card: a decimal 80 GB, all of it usable
    o = calc({"params": [235e9, 284e9], "devices": 8, "memory_per_device_bytes": 80e9, "memory_utilization": 1.0,
              "compare_formats": ["int8", "int4"]}).outputs
    assert o["bytes_total"] == pytest.approx([470e9, 568e9])
    assert o["per_device_bytes"] == pytest.approx([58.75e9, 71e9])
    assert o["remaining_per_device_bytes"] == pytest.approx([21.25e9, 9e9])
    assert o["fits"] == [True, True]
    assert o["by_format"][1]["bytes_total"] == pytest.approx([117.5e9, 142e9])


def test_hardware_memory_and_fit():
    o = calc({"params": 1.6e12, "weight_format": "int4", "devices": 8, "hardware": "gpu80"}, fake_lookup).outputs
    assert o["bytes_total"] == pytest.approx(800e9)
    assert o["fits"] is False
    assert o["min_devices"] == math.ceil(800e9 / (0.9 * 80e9))   # the memory rule: 90 % of each device is usable


def test_moe_architecture_mixed_formats():
    arch = {"layers": 94, "hidden_size": 4096, "heads": 64, "kv_heads": 4, "head_dim": 128, "vocab_size": 151936,
            "qk_norm": True, "moe": {"experts": 128, "experts_per_token": 8, "expert_ffn_size": 1536}}
    bf16 = calc({"architecture": arch}).outputs
    assert bf16["params_total"] == pytest.approx(235.09e9, rel=1e-3)   # Qwen3-235B-A22B
    assert bf16["params_active"] == pytest.approx(22.19e9, rel=1e-3)
    mixed = calc({"architecture": arch, "component_formats": {"routed_experts": "int4"}}).outputs
    experts = bf16["breakdown"]["routed_experts"]["params"]
    assert mixed["bytes_total"] == pytest.approx(bf16["bytes_total"] - experts * 1.5)
    ep = calc({"architecture": arch, "devices": 3, "expert_parallel": True}).outputs
    tp = calc({"architecture": arch, "devices": 3}).outputs
    assert ep["per_device_bytes"] > tp["per_device_bytes"]     # 128 experts over 3 devices: 43 on the busiest one


def test_mla_deepseek_v3_total():
    arch = {"layers": 61, "hidden_size": 7168, "heads": 128, "kv_heads": 128, "head_dim": 192, "ffn_size": 18432,
            "vocab_size": 129280, "attention": "mla",
            "moe": {"experts": 256, "experts_per_token": 8, "shared_experts": 1, "expert_ffn_size": 2048, "dense_layers": 3},
            "mla": {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}}
    o = calc({"architecture": arch}).outputs
    assert o["params_total"] == pytest.approx(671e9, rel=1e-3)
    assert o["params_active"] == pytest.approx(37.5e9, rel=2e-2)


def test_group_scale_formats():
    t = [{"name": "w", "shape": [12288, 4096]}]
    assert calc({"tensors": t, "weight_format": "nvfp4"}).outputs["bytes_total"] == 27 * 2**20
    assert calc({"tensors": t, "weight_format": "mxfp4"}).outputs["bytes_total"] == 25.5 * 2**20
    custom = {"bits_per_value": 4, "group_size": 128, "scale_bytes_per_group": 2}
    assert calc({"tensors": t, "weight_format": custom}).outputs["bytes_total"] == calc({"tensors": t, "weight_format": "int4_g128"}).outputs["bytes_total"]


def test_tensor_list_copies_and_shards():
    o = calc({"tensors": [{"name": "qkv", "shape": [4096, 6144]}, {"name": "o", "shape": [4096, 4096]},
                          {"name": "swiglu", "shape": [4096, 12288], "count": 3}], "devices": [1, 2, 4]}).outputs
    mib = 2**20
    assert [r["bytes"] / mib for r in o["tensors"]] == [48, 32, 288]
    assert [b / mib for b in o["per_device_bytes"]] == [368, 184, 92]
    o36 = calc({"tensors": [{"shape": [4096, 12288], "count": 3}], "copies": 9}).outputs
    assert o36["bytes_total"] / 2**30 == 2.53125


def test_fits_on_store_hardware(lookup):
    o = calc({"model": "qwen3-8b", "hardware": "h100-sxm"}, lookup).outputs
    # an H100 holds 80 GiB; the memory rule leaves 90 % of it to the engine
    assert o["memory_per_device_bytes"] == 80 * GIB
    assert o["fits"] is True and o["remaining_per_device_bytes"] == pytest.approx(0.9 * 80 * GIB - o["per_device_bytes"])
    assert any("bf16" in a and "published" in a for a in r_assumptions(lookup))


@given(p=st.floats(1e6, 1e13), n=st.integers(1, 1024))
def test_per_device_share_is_total_over_devices(p, n):
    o = calc({"params": p, "devices": n}).outputs
    assert o["per_device_bytes"] == pytest.approx(o["bytes_total"] / n)


@settings(max_examples=30)
@given(bits=st.floats(1, 32), extra=st.floats(0.01, 8))
def test_more_bits_never_fewer_bytes(bits, extra):
    a = calc({"params": 1e9, "weight_format": {"bits_per_value": bits}}).outputs["bytes_total"]
    b = calc({"params": 1e9, "weight_format": {"bits_per_value": bits + extra}}).outputs["bytes_total"]
    assert b > a


def test_sweep_matches_scalar_calls():
    sweep = calc({"params": [7e9, 70e9], "devices": [1, 4], "memory_per_device_bytes": 80e9}).outputs
    for i, (p, d) in enumerate([(7e9, 1), (70e9, 4)]):
        one = calc({"params": p, "devices": d, "memory_per_device_bytes": 80e9}).outputs
        assert sweep["per_device_bytes"][i] == one["per_device_bytes"]
        assert sweep["fits"][i] == one["fits"]


def test_validation():
    with pytest.raises(ValidationError):
        calc({"params": 1e9, "architecture": QWEN3_8B})          # two sources
    with pytest.raises(ValidationError):
        calc({"params": -1})
    with pytest.raises(ValidationError):
        calc({"params": 1e9, "weight_format": "int3"})
    with pytest.raises(ValidationError):
        calc({"params": 1e9, "devices": 0})
    with pytest.raises(CalcInputError):
        calc({"model": "nope"})
    with pytest.raises(CalcInputError):
        calc({"architecture": {**QWEN3_8B, "moe": {"experts": 4, "experts_per_token": 8, "expert_ffn_size": 8}}})


def test_unitemised_attention_falls_back_to_stored_total():
    r = calc({"model": "fake-hybrid", "weight_format": "bf16"}, fake_lookup)
    assert r.outputs["bytes_total"] == pytest.approx(568e9)
    assert any("params_total" == s["field"] for s in r.sources)


# --------------------------------------------------------------------------- schema-fuzzing regressions

def test_empty_model_id_is_refused():
    # `model: ""` passed the "exactly one of" check but read as absent later (an AttributeError, a 500).
    with pytest.raises(ValidationError) as e:
        calc({"model": ""})
    assert e.value.errors()[0]["loc"][0] == "model"


def test_architecture_bounds_and_counts_beyond_64_bits():
    # Fuzzed shapes of up to 1e15 per dimension made parameter counts like 5.5e20 as Python ints, which JSON
    # (64-bit integers) cannot carry: a 500. Shapes are now bounded, and counts past 2^53 are floats.
    import orjson
    with pytest.raises(ValidationError) as e:
        calc({"architecture": {**QWEN3_8B, "hidden_size": 2968659775394}})
    assert e.value.errors()[0]["loc"] == ("architecture", "hidden_size")
    biggest = {"layers": 10**5, "hidden_size": 10**7, "heads": 10**5, "kv_heads": 10**5, "head_dim": 10**6,
               "ffn_size": 10**7, "vocab_size": 10**8,
               "moe": {"experts": 10**6, "experts_per_token": 10**6, "shared_experts": 10**4, "expert_ffn_size": 10**7}}
    r = calc({"architecture": biggest, "compare_formats": ["int4"], "devices": [1, 8]})
    o = orjson.loads(orjson.dumps({"outputs": r.outputs, "steps": [s.as_dict() for s in r.steps]},
                                  option=orjson.OPT_SERIALIZE_NUMPY))["outputs"]
    assert isinstance(o["params_active"], float) and o["params_active"] > 2**63
    # real models keep exact integer counts
    assert calc({"architecture": QWEN3_8B, "include_embeddings": False, "include_norms": False}).outputs["core_matrix_params"] \
        == 6_945_767_424


def r_assumptions(lookup):
    return run("weight-memory", {"model": "qwen3-8b", "hardware": "h100-sxm"}, lookup)[2].assumptions
