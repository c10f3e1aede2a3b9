"""kv-eviction: sink + recent + heavy-hitter budgets against the full history."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from calculators.framework.registry import REGISTRY
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)


def calc(body, lookup=no_lookup):
    return run("kv-eviction", body, lookup)[2].outputs


def test_streaming_llm_budget_on_qwen3_8b(lookup):
    o = calc({"model": "qwen3-8b", "tokens": [1000, 32768], "sink_tokens": 4, "recent_tokens": 2044}, lookup)
    assert o["entries_kept"] == [1000, 2048]
    assert o["bytes_kept_per_request"] == [1000 * 147_456, 2048 * 147_456]
    assert o["bytes_saved_per_request"] == [0, (32768 - 2048) * 147_456]
    assert o["fraction_kept"][1] == pytest.approx(1 / 16)


def test_h2o_twenty_percent_budget(lookup):
    o = calc({"model": "llama-3.1-8b", "tokens": 10_000, "sink_tokens": 0, "recent_fraction": 0.1,
              "heavy_hitter_fraction": 0.1}, lookup)
    assert o["entries_kept"] == 2000 and o["fraction_kept"] == pytest.approx(0.2)
    assert o["compression_ratio"] == pytest.approx(5)


def test_window_layers_are_not_evicted(lookup):
    o = calc({"model": "gpt-oss-120b", "tokens": 8192, "recent_tokens": 1024}, lookup)
    window_part = 18 * 1024 * 2 * 128
    assert o["bytes_kept_per_request"] == (4 + 1024) * 18 * 1024 * 2 + window_part


def test_state_only_model_saves_nothing():
    o = calc({"architecture": {"layer_groups": [{"count": 4, "state_elements": 1000}]}, "tokens": 10**6, "recent_tokens": 10})
    assert o["bytes_saved_per_request"] == 0 and o["bytes_full_per_request"] == 4 * 1000 * 4


def test_budget_gives_more_requests(lookup):
    body = {"model": "qwen3-8b", "tokens": 32768, "recent_tokens": 4092, "memory_budget_bytes": 40 * 2**30, "tp": 2}
    o = calc({**body, "subtract_weights": False}, lookup)           # a budget that is KV only
    assert o["max_requests_full"] == 8      # 40 GiB / 4.5 GiB
    assert o["max_requests_kept"] == 71     # 40 GiB / (4,096 × 144 KiB = 0.5625 GiB)
    assert o["per_device_bytes_kept_per_request"] * 2 == o["bytes_kept_per_request"]
    # by default the model's weights (as weight-memory counts them) come out of the budget first
    w = run("weight-memory", {"model": "qwen3-8b"}, lookup)[2].outputs["bytes_total"]
    d = calc(body, lookup)
    assert d["max_requests_full"] == (40 * 2**30 - w) // o["bytes_full_per_request"]
    assert d["max_requests_kept"] == (40 * 2**30 - w) // o["bytes_kept_per_request"]


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 10**7), s=st.integers(0, 100), w=st.integers(0, 10**5), hh=st.integers(0, 10**5),
       rf=st.floats(0, 1), hf=st.floats(0, 1))
def test_kept_is_bounded_and_parts_add_up(n, s, w, hh, rf, hf):
    o = calc({"kv_bytes_per_token": 1000, "tokens": n, "sink_tokens": s, "recent_tokens": w, "heavy_hitter_tokens": hh,
              "recent_fraction": rf, "heavy_hitter_fraction": hf})
    assert 0 <= o["entries_kept"] <= n
    assert o["kept_sinks"] + o["kept_recent"] + o["kept_heavy_hitters"] == o["entries_kept"]
    assert 0 <= o["bytes_kept_per_request"] <= o["bytes_full_per_request"]
    assert 0 <= o["fraction_kept"] <= 1


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 10**6), extra=st.integers(0, 10**6))
def test_bigger_budget_keeps_more(n, extra):
    a = calc({"kv_bytes_per_token": 1, "tokens": n, "recent_tokens": 100})
    b = calc({"kv_bytes_per_token": 1, "tokens": n, "recent_tokens": 100 + extra})
    assert b["entries_kept"] >= a["entries_kept"]


def test_sweep_matches_scalar_calls(lookup):
    toks = [0, 5, 4096, 100_000]
    o = calc({"model": "mistral-7b", "tokens": toks, "recent_tokens": 512}, lookup)
    for i, t in enumerate(toks):
        assert o["bytes_kept_per_request"][i] == calc({"model": "mistral-7b", "tokens": t, "recent_tokens": 512}, lookup)[
            "bytes_kept_per_request"]


@pytest.mark.parametrize("body", [
    {"kv_bytes_per_token": 1, "tokens": -5},
    {"kv_bytes_per_token": 1, "tokens": 5, "recent_fraction": 2},
    {"kv_bytes_per_token": 1, "tokens": 5, "sink_tokens": -1},
    {"kv_bytes_per_token": 1, "tokens": 5, "whatever": 1},
])
def test_bad_input_is_refused(body):
    with pytest.raises(ValidationError):
        REGISTRY["kv-eviction"].request_model.model_validate(body)


def test_needs_exactly_one_kv_source():
    with pytest.raises(CalcInputError):
        calc({"tokens": 5})
    with pytest.raises(CalcInputError):
        calc({"tokens": 5, "kv_bytes_per_token": 1, "architecture": {"layer_groups": [{"count": 1}]}})
