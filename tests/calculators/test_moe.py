"""moe / moe-placement: the book's expert sizes, routing, padding, dispatch, offload and placement examples."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import GIB, MIB, CalcInputError, no_lookup
from calculators.framework.runner import compute as run

QWEN = {"expert_hidden_size": 4096, "expert_ffn_size": 1536, "experts": 128, "experts_per_token": 8, "shared_experts": 0}


def moe(body, lookup=no_lookup):
    return run("moe", body, lookup)[2].outputs


def place(body, lookup=no_lookup):
    return run("moe-placement", body, lookup)[2].outputs


def test_qwen3_235b_expert_size_from_the_store(lookup):
    o = moe({"model": "qwen3-235b-a22b"}, lookup)
    assert o["expert_params"] == 18_874_368
    assert o["expert_bytes"] == 36 * MIB
    assert o["routed_bytes_per_layer"] == 4.5 * GIB
    assert o["per_token_weight_bytes_per_layer"] == 288 * MIB
    assert o["moe_layers"] == 94
    assert o["routed_bytes_all_layers"] == 423 * GIB


def test_explicit_fields_match_the_store(lookup):
    a = moe({"model": "qwen3-235b-a22b", "tokens": 8}, lookup)
    b = moe({**QWEN, "moe_layers": 94, "tokens": 8})
    assert a["expected_bytes_per_step"] == pytest.approx(b["expected_bytes_per_step"])


def test_v4_flash_expert_flops():
    o = moe({"expert_hidden_size": 4096, "expert_ffn_size": 2048, "experts": 256, "experts_per_token": 6,
             "shared_experts": 1, "moe_layers": 43})
    assert o["expert_params"] == 25_165_824
    assert o["flops_per_token_per_layer"] == 352_321_536
    assert o["flops_per_token_all_layers"] / 1e9 == pytest.approx(15.15, abs=0.005)


def test_k3_routed_flops_exclude_shared(lookup):
    o = moe({"model": "kimi-k3", "expert_hidden_size": 3584}, lookup)
    assert o["expert_params"] == 33_030_144
    assert o["routed_flops_per_token_per_layer"] == pytest.approx(1.057e9, rel=1e-3)
    assert o["flops_per_token_per_layer"] > o["routed_flops_per_token_per_layer"]  # K3 has 2 shared experts


def test_expected_active_experts():
    o = moe({**QWEN, "tokens": [1, 8, 32]})
    assert o["expected_distinct_experts"] == pytest.approx([8.0, 51.6199073493, 111.7710353437])
    assert o["expected_bytes_per_layer"][1] / GIB == pytest.approx(1.815, abs=5e-4)
    assert o["min_bytes_per_layer"] == 288 * MIB


def test_grouped_gemm_padding_and_capacity():
    o = moe({**QWEN, "tokens_per_expert": [32, 16, 8, 4, 2, 1, 1, 0], "tile_rows": 32, "capacity_factor": 1.0})
    obs = o["observed"]
    assert (obs["actual_rows"], obs["nonempty_blockwise_rows"], obs["all_experts_to_max_rows"]) == (64, 224, 256)
    assert obs["all_experts_to_max_ratio"] == 4
    assert obs["capacity_rows"] == 8 and obs["dropped_rows"] == (32 - 8) + (16 - 8)


def test_offload_cpu_vs_gpu_paths():
    body = {**QWEN, "tokens": [1, 2048], "offload": {"gpu_resident_experts": 32, "cpu_memory_bytes_per_s": 100 * GIB,
                                                     "cpu_flop_per_s": 2e12, "h2d_bytes_per_s": 24 * GIB, "gpu_flop_per_s": 1e14}}
    off = moe(body)["offload"]
    assert off["expected_cold_experts"] == pytest.approx([6.0, 96.0])
    assert off["expected_cold_tasks"] == pytest.approx([6.0, 12288.0])
    assert off["cpu_path_s"] == pytest.approx([2.109375e-3, 231.928233984e-3])
    assert off["gpu_path_s"] == pytest.approx([8.79132742416e-3, 145.26356467968e-3])
    assert off["faster"] == ["cpu", "gpu"]
    assert off["activation_roundtrip_bytes_per_layer"] == [16 * 1024, 32 * MIB]


def test_af_activation_roundtrip_one_remote_node():
    o = moe({"expert_hidden_size": 4096, "expert_ffn_size": 1536, "experts": 128, "experts_per_token": 8,
             "moe_layers": 32, "tokens": 1, "ep_nodes": 1})
    d = o["dispatch"]
    assert d["nodes_per_token"] == 1
    assert d["dedup_roundtrip_bytes_all_layers"] == 0.5 * MIB
    assert d["directed_messages_per_step"] == 64


def test_routing_record_bytes():
    o = moe({**QWEN, "tokens": 8192, "moe_layers": 48, "expert_id_bytes": 2})
    assert o["routing_record_bytes"] == 6 * MIB


def test_placement_book_examples(lookup):
    o = place({"model": "qwen3-235b-a22b", "ep": 16, "extra_replicas": [94, 8, 1],
               "replica_balance": {"rank_rows": [512, 256, 512, 512], "hot_rows": 256, "replica_ranks": [0, 1],
                                   "flop_per_s": 50e12, "overhead_s": 60e-6},
               "rebalance": {"experts_moved": 8, "link_bandwidth_bytes_per_s": 25e9, "exposed_s": 0.02, "saving_per_step_s": 40e-6,
                             "horizon_steps": [200, 2000]},
               "resize": {"from_ranks": 8, "to_ranks": 16, "bytes_per_s": 100e9}}, lookup)
    assert o["per_rank_bytes"] == 26.4375 * GIB
    assert [x / GIB for x in o["extra_replica_bytes"]] == [3.3046875, 0.28125, 36 / 1024]
    rb = o["replica_balance"]
    assert rb["total_rows"] == 2048
    assert rb["split_even_rows"] == [640, 384, 512, 512] and rb["by_headroom_rows"] == [512, 512, 512, 512]
    assert rb["split_even_s"] == pytest.approx(0.4832e-3, abs=5e-8)
    assert rb["net_saving_s"] == pytest.approx(36.6e-6, abs=5e-8)
    assert o["rebalance"]["break_even_steps"] == pytest.approx(500)
    assert o["rebalance"]["net_saving_s"] == pytest.approx([-0.012, 0.06])
    rz = o["resize"]
    assert rz["per_rank_bytes_before"] == 52.875 * GIB and rz["new_ranks_receive_bytes"] == 211.5 * GIB
    assert rz["transfer_lower_bound_s"] == pytest.approx(2.27, abs=0.005)


@given(base=st.lists(st.integers(0, 1000), min_size=1, max_size=8), hot=st.integers(0, 5000))
def test_water_fill_is_balanced_and_conserves_rows(base, hot):
    o = place({**QWEN, "replica_balance": {"rank_rows": base, "hot_rows": hot, "replica_ranks": list(range(len(base))),
                                           "flop_per_s": 1e12}})["replica_balance"]
    filled = o["by_headroom_rows"]
    assert sum(filled) == sum(base) + hot
    assert all(f >= b for f, b in zip(filled, base))
    assert max(filled) <= o["split_even_max_rows"]
    assert max(filled) == max(max(base), math.ceil((sum(base) + hot) / len(base)))  # the optimum


@settings(max_examples=60)
@given(E=st.integers(1, 512), k=st.integers(1, 16), t=st.integers(1, 10**6))
def test_distinct_experts_bounded_and_monotone(E, k, t):
    k = min(k, E)
    o = moe({"expert_hidden_size": 64, "expert_ffn_size": 64, "experts": E, "experts_per_token": k, "tokens": [t, t + 1]})
    d = o["expected_distinct_experts"]
    assert k - 1e-9 <= d[0] <= min(E, t * k) + 1e-9
    assert d[1] >= d[0] - 1e-12


def test_sweep_matches_scalar_calls():
    ts = [1, 3, 17, 400]
    sweep = moe({**QWEN, "tokens": ts, "ep_nodes": 4})
    for i, t in enumerate(ts):
        one = moe({**QWEN, "tokens": t, "ep_nodes": 4})
        assert sweep["expected_distinct_experts"][i] == pytest.approx(one["expected_distinct_experts"])
        assert sweep["dispatch"]["dedup_bytes_per_layer"][i] == pytest.approx(one["dispatch"]["dedup_bytes_per_layer"])


def test_dedup_never_sends_more_than_plain_dispatch():
    for g in (1, 2, 8, 16, 128):
        d = moe({**QWEN, "tokens": 64, "ep_nodes": g})["dispatch"]
        assert 1 <= d["nodes_per_token"] <= min(8, g) + 1e-12
        assert d["dedup_bytes_per_layer"] <= d["bytes_per_layer"] + 1e-9


def test_validation():
    with pytest.raises(CalcInputError):
        moe({"expert_hidden_size": 8, "expert_ffn_size": 8, "experts": 4, "experts_per_token": 8})
    with pytest.raises(CalcInputError):
        moe({"expert_ffn_size": 8, "experts": 4, "experts_per_token": 2})  # no hidden size, no model
    with pytest.raises(CalcInputError):
        moe({**QWEN, "ep_nodes": 3})
    with pytest.raises(ValidationError):
        moe({**QWEN, "tokens": 0})
    with pytest.raises(ValidationError):
        moe({**QWEN, "bogus": 1})
    with pytest.raises(CalcInputError):
        place({**QWEN, "replica_balance": {"rank_rows": [1, 2], "hot_rows": 3, "replica_ranks": [5], "flop_per_s": 1}})


def test_unknown_and_dense_models(lookup):
    with pytest.raises(CalcInputError):
        moe({"model": "no-such-model"}, lookup)
    with pytest.raises(CalcInputError):
        moe({"model": "qwen3-8b"}, lookup)


def test_routing_record_encodings(lookup):
    o = moe({"model": "qwen3-30b-a3b", "tokens": 8192, "expert_id_bytes": [2, 4]}, lookup)
    assert o["routing_record_bytes"] == [6 * MIB, 12 * MIB]
    with pytest.raises(ValidationError):
        moe({**QWEN, "moe_layers": 2, "expert_id_bytes": 9})


# --------------------------------------------------------------------------- schema-fuzzing regressions

MOE_EXAMPLE = {**QWEN, "moe_layers": 94, "tokens": [1, 8, 32], "tokens_per_expert": [32, 16, 8, 4, 2, 1, 1, 0],
               "tile_rows": 32, "ep_nodes": 8, "capacity_factor": 1.25, "expert_id_bytes": 2}


@pytest.mark.parametrize("field, value", [
    ("ffn_matrices", 999999999999999),   # the fuzzed value: parameters = 1e15 × h × f overflowed 64-bit JSON
    ("weight_bytes_per_param", 65.0), ("activation_bytes", 65.0), ("expert_hidden_size", 10**7 + 1),
    ("experts", 10**6 + 1), ("shared_experts", 10**4 + 1), ("moe_layers", 10**5 + 1), ("tile_rows", 10**6 + 1),
    ("capacity_factor", 1001.0), ("ep_nodes", 10**5 + 1),
])
def test_moe_bounds_are_enforced(field, value):
    # These bounds were written as Field(le=...) next to PosInt/PosFloat, which pydantic silently ignores.
    with pytest.raises(ValidationError) as e:
        moe({**MOE_EXAMPLE, field: value})
    assert e.value.errors()[0]["loc"][0] == field


def test_placement_bounds_are_enforced_and_largest_inputs_answer():
    base = {**QWEN, "moe_layers": 94, "ep": 16,
            "resize": {"from_ranks": 8, "to_ranks": 16, "bytes_per_s": 100e9}}
    for bad in ({"ffn_matrices": 999999999999999}, {"ep": 10**6 + 1},
                {"resize": {"from_ranks": 8, "to_ranks": 10**6 + 1, "bytes_per_s": 1e9}}):
        with pytest.raises(ValidationError):
            place({**base, **bad})
    import orjson
    big = {**base, "ffn_matrices": 16, "expert_hidden_size": 10**7, "expert_ffn_size": 10**7,
           "weight_bytes_per_param": 64}
    _, _, r = run("moe-placement", big, no_lookup)
    orjson.dumps(r.outputs, option=orjson.OPT_SERIALIZE_NUMPY)   # every count fits JSON
    assert r.outputs["expert_params"] == 16 * 10**14
