"""training-compute: 6ND tables, MoE expert FLOPs, attention term, days and GPU-hours."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)


def calc(body, lookup=no_lookup):
    return run("training-compute", body, lookup)[2].outputs


def test_six_nd_and_tokens_per_param():
    o = calc({"params": [6.7e9, 7e9, 8e9, 7e9, 8e9], "tokens": [1e12, 2e12, 15e12, 18e12, 36e12]})
    assert o["six_nd_flops"] == pytest.approx([4.02e22, 8.4e22, 7.2e23, 7.56e23, 1.728e24])
    assert o["tokens_per_param"] == pytest.approx([149.25373, 285.71429, 1875, 2571.42857, 4500])


def test_dense_training_days_table():
    peaks = [312e12, 989e12, 2250e12]
    o = calc({"params": [1e12] * 3 + [10e12] * 3, "tokens": 20e12, "devices": 16384, "mfu": 0.5, "peak_flop_per_s": peaks * 2})
    assert [round(d, 1) for d in o["days"]] == [543.4, 171.4, 75.4, 5434.0, 1714.3, 753.5]


def test_v4_flash_expert_flops():
    arch = {"layers": 43, "hidden_size": 4096, "moe": {"experts": 256, "experts_per_token": 6, "shared_experts": 1,
                                                        "expert_ffn_size": 2048}}
    o = calc({"architecture": arch, "tokens": 32e12, "include_lm_head": False})
    assert o["expert_flops_per_token"] == 18 * 43 * 4096 * 2048 * 7
    assert o["expert_flops"] == pytest.approx(1.45438e24, rel=1e-5)
    mtp = calc({"architecture": {**arch, "layers": 1}, "tokens": 32e12, "include_lm_head": False})
    assert mtp["expert_flops"] == pytest.approx(3.38229e22, rel=1e-5)


def test_attention_term():
    o = calc({"params": 17e9, "tokens": 1e12, "attention": {"layers": 15, "heads": 32, "head_dim": 256},
              "sequence_tokens": [8192, 262144]})
    assert o["attention_flops_per_token"] == [6 * 15 * 32 * 256 * 8193, 6 * 15 * 32 * 256 * 262145]


def test_recompute_is_eight_nd():
    a = calc({"params": 8e9, "tokens": 1e12})["flops_total"]
    b = calc({"params": 8e9, "tokens": 1e12, "recompute": "full"})["flops_total"]
    assert b == pytest.approx(a * 8 / 6)


def test_threshold_and_gpu_hours():
    o = calc({"params": 8e9, "tokens": 100e9, "devices": 16, "target_s": 30 * 86400})
    assert o["required_flop_per_s_per_device"] == pytest.approx(115.74e12, rel=1e-4)
    g = calc({"gpu_hours": [1_022_362, 2_664_000, 30.84e6], "devices": [2048, 2048, 16384]})
    assert [round(d, 2) for d in g["days"]] == [20.80, 54.20, 78.43]


def test_store_model_and_hardware(lookup):
    o = calc({"model": "qwen3-8b", "tokens": 1e12, "hardware": "h100-sxm", "devices": 8, "mfu": 0.5}, lookup)
    assert o["peak_flop_per_s"] == pytest.approx(989.4e12)          # dense BF16 row, not the sparse one
    assert o["days"] == pytest.approx(o["flops_total"] / (8 * 989.4e12 * 0.5) / 86400)


def test_implied_mfu_from_throughput():
    o = calc({"params": 8e9, "tokens": 1e12, "tokens_per_s": 1e6, "devices": 100, "peak_flop_per_s": 1e15})
    assert o["implied_mfu"] == pytest.approx(6 * 8e9 * 1e6 / (100 * 1e15))


@given(n=st.floats(1e6, 1e13), d=st.floats(1e6, 1e14), g=st.integers(1, 100000))
def test_more_devices_fewer_days(n, d, g):
    base = {"params": n, "tokens": d, "peak_flop_per_s": 1e15, "mfu": 0.4}
    assert calc({**base, "devices": g + 1})["days"] < calc({**base, "devices": g})["days"]


def test_validation():
    with pytest.raises(ValidationError):
        calc({"tokens": 8e9})                      # no model, no throughput
    with pytest.raises(ValidationError):
        calc({"params": 8e9, "tokens": 1e9, "mfu": 1.5})
    with pytest.raises(CalcInputError):
        calc({"params": 8e9, "tokens": 1e9, "sequence_tokens": 4096})   # no attention shape
    with pytest.raises(CalcInputError):
        calc({"params": 8e9, "tokens": 1e9, "peak_flop_per_s": 1e15, "mfu": 0})


def test_per_token_only_and_throughput_only():
    o = calc({"params": 17e9, "attention": {"layers": 15, "heads": 32, "head_dim": 256}, "sequence_tokens": 8192})
    assert "flops_total" not in o and o["attention_flops_per_token"] == 6 * 15 * 32 * 256 * 8193
    d = calc({"tokens": 300e9, "tokens_per_s": 1.984e6})
    assert d["days"] == pytest.approx(300e9 / 1.984e6 / 86400)
