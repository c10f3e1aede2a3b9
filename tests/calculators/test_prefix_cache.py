"""prefix-cache: the compendium's system-prompt claim, hybrid-state checkpoints, billing, and invariants."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import MIB, CalcInputError, no_lookup
from calculators.framework.registry import REGISTRY
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

K3_STATE = {"architecture": {"layer_groups": [
    {"name": "kda", "count": 69, "state_elements": 96 * 128 * 128, "state_heads": 96},
    {"name": "short conv", "count": 69, "state_elements": 3 * 3 * 96 * 128, "state_heads": 96, "state_format": "bf16"},
    {"name": "mla", "count": 24, "streams": [{"dim": 576}]}]}}


def calc(body, lookup=no_lookup):
    return run("prefix-cache", body, lookup)[2].outputs


def test_system_prompt_on_llama_70b_gqa_is_655_mb_not_200(lookup):
    # compendium: "a 2,000-token system prompt on an 80-layer 70B model saves about 200 MB per request"
    o = calc({"model": "llama-3.1-70b", "kv_format": "fp16", "prefix_tokens": 2000, "requests": 2}, lookup)
    assert o["kv_bytes_saved_per_hit"] == 655_360_000            # GQA, 8 KV heads: ~655 MB
    mha = calc({"architecture": {"layer_groups": [{"count": 80, "streams": [{"dim": 2 * 64 * 128}]}]},
                "kv_format": "fp16", "prefix_tokens": 2000, "requests": 2})
    assert mha["kv_bytes_saved_per_hit"] == 5_242_880_000        # MHA (64 KV heads): 8× more
    assert abs(o["kv_bytes_saved_per_hit"] - 200e6) > 400e6       # the printed 200 MB fits neither


def test_kda_checkpoint_per_card_53_57_mib():
    o = calc({**K3_STATE, "prefix_tokens": 8192, "tp": 8, "state_checkpoint_interval_tokens": 8192})
    assert o["state_bytes"] == pytest.approx(428.5546875 * MIB)
    assert o["state_bytes_per_device"] == pytest.approx(53.5693359375 * MIB)
    assert o["prefix_kv_bytes_per_device"] == 216 * MIB       # MLA latent replicated on every rank


def test_checkpoint_retention_interval_sweep():
    o = calc({**K3_STATE, "prefix_tokens": 8192, "tp": 8, "state_checkpoint_interval_tokens": [4096, 1024, 256]})
    assert o["state_checkpoints"] == [2, 8, 32]
    assert [b / MIB for b in o["state_snapshot_bytes_per_device"]] == pytest.approx([107.138671875, 428.5546875, 1714.21875])


def test_recoverable_prefix_frontier(lookup):
    o = calc({"model": "kimi-k3", "prefix_tokens": 10752, "state_checkpoint_interval_tokens": 4096, "block_size_tokens": 256}, lookup)
    assert o["restore_point_tokens"] == 8192 and o["recompute_tokens"] == 2560


def test_ten_rounds_of_cached_billing():
    o = calc({"prefix_tokens": 8000, "requests": 10, "new_input_tokens": 2000,
              "price_per_million_tokens_usd": {"input": 2, "cache_write": 2.5, "cache_read": 0.2}})
    assert o["cost_uncached_usd"] == pytest.approx(0.20)
    assert o["cost_first_request_usd"] == pytest.approx(0.024)
    assert o["cost_later_request_usd"] == pytest.approx(0.0056)
    assert o["cost_cached_usd"] == pytest.approx(0.0744)


def test_qwen3_prefill_flops_skipped_match_the_book(lookup):
    o = calc({"model": "qwen3-8b", "prefix_tokens": 8192, "prefill_flops_per_token": 385_875_968 * 36,
              "peak_flop_per_s": 1e15}, lookup)
    assert o["prefill_flops_linear_per_hit"] / 1e12 == pytest.approx(113.799, abs=1e-3)
    assert o["prefill_flops_attention_per_hit"] / 1e12 == pytest.approx(19.794, abs=1e-3)
    assert o["ttft_saved_per_hit_s"] == pytest.approx(o["prefill_flops_per_hit"] / 1e15)


def test_ttft_from_token_rate_and_expected_value():
    o = calc({"kv_bytes_per_token": 100, "params": 8e9, "prefix_tokens": 4000, "requests": 11, "prefix_hit_rate": 0.5,
              "prefill_tokens_per_s": 8000})
    assert o["ttft_saved_per_hit_s"] == 0.5 and o["expected_ttft_saved_s"] == 0.25
    assert o["expected_hits"] == 5
    assert o["kv_bytes_saved"] == 5 * 400_000
    assert o["prefill_flops_skipped"] == 5 * 2 * 8e9 * 4000


def test_snapshots_can_cost_more_than_they_save():
    o = calc({**K3_STATE, "prefix_tokens": 8192, "requests": 2, "state_checkpoint_interval_tokens": 256})
    assert o["kv_bytes_saved"] < 0


@settings(max_examples=60, deadline=None)
@given(h1=st.floats(0, 1), h2=st.floats(0, 1), r=st.integers(1, 10**4), p=st.integers(0, 10**6))
def test_savings_grow_with_hit_rate(h1, h2, r, p):
    lo, hi = sorted((h1, h2))
    base = {"kv_bytes_per_token": 1000, "params": 1e9, "prefix_tokens": p, "requests": r}
    a, b = calc({**base, "prefix_hit_rate": lo}), calc({**base, "prefix_hit_rate": hi})
    assert b["kv_bytes_saved"] >= a["kv_bytes_saved"] - 1e-6
    assert b["prefill_flops_skipped"] >= a["prefill_flops_skipped"] - 1e-6
    assert a["kv_bytes_with_sharing"] <= a["kv_bytes_without_sharing"] + 1e-6


@settings(max_examples=40, deadline=None)
@given(p=st.integers(0, 10**6), i=st.integers(1, 10**5))
def test_restore_point_is_a_checkpoint_below_the_prefix(p, i):
    o = calc({"kv_bytes_per_token": 1, "prefix_tokens": p, "state_checkpoint_interval_tokens": i})
    assert 0 <= o["restore_point_tokens"] <= p and o["restore_point_tokens"] % i == 0
    assert o["recompute_tokens"] < i


def test_sweep_matches_scalar_calls(lookup):
    hs = [0.0, 0.3, 1.0]
    o = calc({"model": "qwen3-8b", "prefix_tokens": 1000, "requests": 8, "prefix_hit_rate": hs, "prefill_tokens_per_s": 1e4}, lookup)
    for i, h in enumerate(hs):
        s = calc({"model": "qwen3-8b", "prefix_tokens": 1000, "requests": 8, "prefix_hit_rate": h, "prefill_tokens_per_s": 1e4}, lookup)
        assert o["kv_bytes_saved"][i] == pytest.approx(s["kv_bytes_saved"])
        assert o["expected_ttft_saved_s"][i] == pytest.approx(s["expected_ttft_saved_s"])


@pytest.mark.parametrize("body", [
    {"prefix_tokens": 1, "prefix_hit_rate": 1.5, "params": 1},
    {"prefix_tokens": -1, "params": 1},
    {"prefix_tokens": 1, "requests": 0, "params": 1},
    {"prefix_tokens": 1, "price_per_million_tokens_usd": {"input": -1, "cache_read": 0}},
    {"prefix_tokens": 1, "params": 1, "bogus": True},
])
def test_bad_input_is_refused(body):
    with pytest.raises(ValidationError):
        REGISTRY["prefix-cache"].request_model.model_validate(body)


def test_semantic_errors(lookup):
    with pytest.raises(CalcInputError):
        calc({"prefix_tokens": 10})                                         # nothing to compute
    with pytest.raises(CalcInputError):
        calc({"model": "qwen3-8b", "kv_bytes_per_token": 1, "prefix_tokens": 10}, lookup)
    with pytest.raises(CalcInputError):
        calc({"kv_bytes_per_token": 1, "prefix_tokens": 10, "peak_flop_per_s": 1e12})   # no FLOPs known
    with pytest.raises(CalcInputError):
        calc({"params": 1, "prefix_tokens": 10, "peak_flop_per_s": 1, "prefill_tokens_per_s": 1})


# ---------------------------------------------------------------- one parameter count, a hardware id (issue #28)

def test_prefill_and_training_count_the_same_parameters(lookup):
    """Llama-3.1-8B's N comes from one place (calculators.domain.matrix_params): prefix-cache's prefill (no LM head:
    prefix tokens need no logits) is training-compute's count without the head, and training adds exactly the head."""
    p = calc({"model": "llama-3.1-8b", "prefix_tokens": 1000}, lookup)
    n_prefill = p["prefill_flops_linear_per_hit"] / (2 * 1000)
    no_head = run("training-compute", {"model": "llama-3.1-8b", "include_lm_head": False}, lookup)[2].outputs
    with_head = run("training-compute", {"model": "llama-3.1-8b"}, lookup)[2].outputs
    assert n_prefill == no_head["params"]
    rec = lookup("model", "llama-3.1-8b")
    head = rec["vocab_size"]["value"] * rec["hidden_size"]["value"]
    assert with_head["params"] == n_prefill + head
    # the shapes' count, not the store's rounded label: within a few % of it, below the total with embeddings
    assert 0.8 * rec["params_active"]["value"] < n_prefill < rec["params_active"]["value"]


def test_prefill_rate_from_a_hardware_id(lookup):
    base = {"model": "llama-3.1-8b", "prefix_tokens": 4000, "requests": 8, "prefix_hit_rate": 0.75}
    peak = next(p["flop_per_s"]["value"] for p in lookup("hardware", "h100-sxm")["peaks"]
                if p["input_precision"] == "BF16" and p["sparsity"] == "dense")
    _, _, res = run("prefix-cache", {**base, "hardware": "h100-sxm", "compute_efficiency": 0.5, "tp": 2}, lookup)
    o = res.outputs
    assert o["ttft_saved_per_hit_s"] == pytest.approx(o["prefill_flops_per_hit"] / (peak * 2 * 0.5))
    assert any(s.get("record") == "h100-sxm" for s in res.sources)
    explicit = calc({**base, "peak_flop_per_s": peak, "compute_efficiency": 0.5, "tp": 2}, lookup)
    assert explicit["ttft_saved_per_hit_s"] == pytest.approx(o["ttft_saved_per_hit_s"])
    _, _, res = run("prefix-cache", {**base, "hardware": "h100-sxm"}, lookup)
    assert any("lower bound" in a for a in res.assumptions)
    for body, field in (({**base, "hardware": "h100-sxm", "peak_flop_per_s": 1e15}, "hardware"),
                        ({**base, "hardware": "h100-sxm", "prefill_tokens_per_s": 1e4}, "hardware"),
                        ({"kv_bytes_per_token": 1, "prefix_tokens": 10, "hardware": "h100-sxm"}, "hardware")):
        with pytest.raises(CalcInputError) as e:
            calc(body, lookup)
        assert e.value.loc == (field,), body
