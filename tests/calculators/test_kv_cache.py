"""kv-cache: the book's KV sizes (Qwen3-8B, DeepSeek-V3/V4, Kimi K3, windows), TP, pages, budgets, invariants."""
from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import GIB, KIB, MIB, CalcInputError, UnknownId, no_lookup
from calculators.framework.registry import REGISTRY
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

QWEN3_8B = {"count": 36, "streams": [{"dim": 2048}], "kv_heads": 8}


def calc(body, lookup=no_lookup):
    return run("kv-cache", body, lookup)[2].outputs


def arch(*groups):
    return {"architecture": {"layer_groups": list(groups)}}


# ---------------------------------------------------------------- book examples

def test_qwen3_8b_144_kib_per_token_and_1_125_gib_at_8k(lookup):
    o = calc({"model": "qwen3-8b", "tokens": 8192}, lookup)
    assert o["bytes_per_token"] == 144 * KIB == 147_456
    assert o["bytes_per_request"] == pytest.approx(1.125 * GIB)
    assert o["values_per_request"] == 603_979_776
    assert o["values_per_token"] == 73_728


def test_explicit_architecture_matches_the_model_record(lookup):
    a = calc({**arch(QWEN3_8B), "tokens": [1, 8192], "tp": 4})
    m = calc({"model": "qwen3-8b", "tokens": [1, 8192], "tp": 4}, lookup)
    for key in ("bytes_per_token", "bytes_per_request", "per_device_bytes_per_request", "values_per_request"):
        assert a[key] == m[key]


def test_deepseek_v3_mla_70272_bytes_per_token(lookup):
    assert calc({"model": "deepseek-v3", "tokens": 1}, lookup)["bytes_per_token"] == 70_272


def test_deepseek_v4_flash_reference_cache_59_125_mib(lookup):
    o = calc({"model": "deepseek-v4-flash", "tokens": 8192}, lookup)
    assert o["bytes_per_request"] == pytest.approx(59.125 * MIB)
    assert o["bytes_per_token"] == 0  # no full-history stream: every stream is windowed or compressed


def test_v4_flash_groups_follow_the_book_formula():
    n = 8192
    o = calc({**arch({"count": 2, "streams": [{"dim": 512, "window": 128}]},
                     {"count": 21, "streams": [{"dim": 512, "window": 128}, {"dim": 512, "ratio": 4}, {"dim": 128, "ratio": 4}]},
                     {"count": 20, "streams": [{"dim": 512, "window": 128}, {"dim": 512, "ratio": 128}]}), "tokens": n})
    main = 2 * 512 * (43 * 128 + 21 * (n // 4) + 20 * (n // 128))
    index = 2 * 128 * 21 * (n // 4)
    assert o["bytes_per_request"] == main + index


def test_kimi_k3_kda_state_414_mib_fp32_plus_mla_216_mib(lookup):
    o = calc({"model": "kimi-k3", "tokens": 8192}, lookup)
    assert o["state_elements"] == 108_527_616
    assert o["state_bytes"] == pytest.approx(414 * MIB)
    assert o["bytes_per_request"] - o["state_bytes"] == pytest.approx(216 * MIB)
    assert o["bytes_per_token"] == 27 * KIB
    bf16 = calc({"model": "kimi-k3", "tokens": 8192, "state_format": "bf16"}, lookup)
    assert bf16["state_bytes"] == pytest.approx(207 * MIB)
    # state does not grow with history
    assert calc({"model": "kimi-k3", "tokens": 1}, lookup)["state_bytes"] == o["state_bytes"]


def test_kimi_mla_replicated_and_kda_split_under_tp8(lookup):
    o = calc({"model": "kimi-k3", "tokens": 8192, "tp": 8}, lookup)
    assert o["per_device_bytes_per_request"] == pytest.approx(216 * MIB + 414 * MIB / 8)
    assert o["bytes_all_devices"] == pytest.approx(8 * (216 * MIB + 414 * MIB / 8))


def test_sliding_window_saturates_gpt_oss(lookup):
    o = calc({"model": "gpt-oss-120b", "tokens": [64, 128, 8192, 131072]}, lookup)
    full = 18 * 1024 * 2
    expected = [full * n + full * min(n, 128) for n in (64, 128, 8192, 131072)]
    assert o["bytes_per_request"] == expected
    assert o["bytes_per_token"] == full


def test_gemma_local_layers_cap_at_the_window(lookup):
    o = calc({"model": "gemma-3-27b", "tokens": [1024, 4096]}, lookup)
    local = 52 * 4096 * 2 * 1024
    assert o["bytes_per_request"][1] - o["bytes_per_request"][0] == 10 * 4096 * 2 * (4096 - 1024)
    assert o["groups"][0]["bytes_per_request"] == [local, local]


def test_block_formats_q8_0_q4_0_fp4_block16(lookup):
    for fmt, mib in (("bf16", 1152), ("fp8", 576), ("q8_0", 612), ("q4_0", 324), ("fp4_block16", 324)):
        assert calc({"model": "qwen3-8b", "tokens": 8192, "kv_format": fmt}, lookup)["bytes_per_request"] == pytest.approx(mib * MIB)
    custom = calc({"model": "qwen3-8b", "tokens": 8192,
                   "kv_format": {"bits_per_value": 4, "group_size": 32, "scale_bytes_per_group": 2}}, lookup)
    assert custom["bytes_per_request"] == pytest.approx(324 * MIB)


def test_int8_mobile_kv_112_mib():
    o = calc({**arch({"count": 28, "streams": [{"dim": 2048}]}), "tokens": 2048, "kv_format": "int8"})
    assert o["bytes_per_request"] == 112 * MIB


def test_requests_multiply_and_budget_gives_max_requests():
    o = calc({**arch({"count": 18, "streams": [{"dim": 2048}]}), "tokens": [8192, 16384], "memory_budget_bytes": 4 * GIB})
    assert o["bytes_per_token"] == 72 * KIB
    assert o["max_requests"] == [7, 3]
    t = calc({**arch(QWEN3_8B), "tokens": 8192, "requests": 100})
    assert t["bytes_total"] == pytest.approx(112.5 * GIB)


def test_tp_replicates_kv_heads_when_fewer_than_ranks(lookup):
    o = calc({"model": "qwen3-235b-a22b", "tokens": 8192, "tp": 8}, lookup)
    assert o["per_device_bytes_per_request"] == o["bytes_per_request"] / 4   # 4 heads: one head per rank
    assert o["replication_factor"] == 2
    s = calc({"model": "qwen3-8b", "tokens": 8192, "tp": 4}, lookup)
    assert s["per_device_bytes_per_token"] == 36_864 and s["per_device_bytes_per_request"] == 288 * MIB
    mla = calc({"model": "deepseek-v3", "tokens": 8192, "tp": 8}, lookup)
    assert mla["per_device_bytes_per_request"] == mla["bytes_per_request"]   # latent replicated


def test_pages_round_entries_up():
    o = calc({**arch(QWEN3_8B), "tokens": [8192, 8193], "page_size_tokens": 16})
    assert o["pages_per_request"] == [512, 513]
    assert o["page_bytes"] == 16 * 147_456 == int(2.25 * MIB)
    assert o["bytes_per_request"][1] == 513 * 16 * 147_456


def test_hardware_budget_subtracts_weights(lookup):
    # An H100 holds 80 GiB; the memory rule lets the engine use 90 % of it (vLLM's default), per rank.
    usable = 2 * 80 * GIB * 0.9
    o = run("kv-cache", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 2, "tokens": 8192,
                         "weight_bytes": 140e9}, lookup)[2]
    assert o.outputs["memory_budget_bytes"] == pytest.approx(usable - 140e9)
    assert o.outputs["max_requests"] == int((usable - 140e9) // (8192 * 327_680))
    assert any(s["field"] == "memory_bytes" for s in o.sources)
    assert [s.label for s in o.steps][-6:] == ["usable memory per device", "device memory", "weights", "weights per rank",
                                               "KV budget", "max requests"]
    # without weight_bytes the weights are the model's published format, the same bytes weight-memory reports
    d = run("kv-cache", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 2, "tokens": 8192}, lookup)[2]
    w = run("weight-memory", {"model": "llama-3.1-70b"}, lookup)[2].outputs["bytes_total"]
    assert d.outputs["memory_budget_bytes"] == pytest.approx(usable - w)
    # the book's own reading (decimal 80 GB, all of it usable) is still one field away: a budget net of the weights
    book = run("kv-cache", {"model": "llama-3.1-70b", "memory_budget_bytes": 2 * 80e9 - 140e9, "tp": 2,
                            "tokens": 8192, "subtract_weights": False}, lookup)[2]
    assert book.outputs["max_requests"] == int((160e9 - 140e9) // (8192 * 327_680))
    # or the whole memory with the book's weight bytes, which the calculator takes out itself
    gross = run("kv-cache", {"model": "llama-3.1-70b", "memory_budget_bytes": 2 * 80e9, "tp": 2, "tokens": 8192,
                             "weight_bytes": 140e9}, lookup)[2]
    assert gross.outputs["max_requests"] == book.outputs["max_requests"]
    over = calc({"model": "llama-3.1-70b", "hardware": "h100-sxm", "tokens": 8192}, lookup)
    assert over["max_requests"] == 0 and over["fits"] is False


# ---------------------------------------------------------------- invariants

@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 10**7), extra=st.integers(1, 10**6), w=st.integers(1, 10**5), r=st.integers(1, 1000))
def test_bytes_never_decrease_with_tokens(n, extra, w, r):
    a = {**arch({"count": 3, "streams": [{"dim": 64}, {"dim": 32, "window": w}, {"dim": 16, "ratio": r}],
                 "state_elements": 7})}
    b1 = calc({**a, "tokens": n})["bytes_per_request"]
    b2 = calc({**a, "tokens": n + extra})["bytes_per_request"]
    assert b2 >= b1


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 10**6), r=st.integers(0, 10**4))
def test_total_is_linear_in_requests(n, r):
    o = calc({**arch(QWEN3_8B), "tokens": n, "requests": r})
    assert o["bytes_total"] == o["bytes_per_request"] * r


@settings(max_examples=40, deadline=None)
@given(w=st.integers(1, 10**5), n=st.integers(0, 10**6))
def test_window_stream_never_exceeds_window(w, n):
    o = calc({**arch({"count": 1, "streams": [{"dim": 1, "window": w}]}), "tokens": n, "kv_format": "fp8"})
    assert o["bytes_per_request"] == min(n, w)


@settings(max_examples=30, deadline=None)
@given(tp=st.integers(1, 64), heads=st.sampled_from([1, 2, 4, 8, 16, 64]))
def test_per_device_times_ranks_at_least_total(tp, heads):
    o = calc({**arch({"count": 2, "streams": [{"dim": 2 * heads * 128}], "kv_heads": heads}), "tokens": 1000,
              "tp": tp})
    assert o["per_device_bytes_per_request"] * tp >= o["bytes_per_request"] - 1e-6
    if heads % tp == 0:
        assert o["per_device_bytes_per_request"] * tp == o["bytes_per_request"]


def test_sweep_matches_scalar_calls(lookup):
    toks, reqs = [0, 1, 4096, 100_000], [1, 3, 7, 2]
    o = calc({"model": "deepseek-v4-flash", "tokens": toks, "requests": reqs, "memory_budget_bytes": 1e9,
              "subtract_weights": False}, lookup)
    for i, (t, r) in enumerate(zip(toks, reqs)):
        s = calc({"model": "deepseek-v4-flash", "tokens": t, "requests": r, "memory_budget_bytes": 1e9,
                  "subtract_weights": False}, lookup)
        assert o["bytes_total"][i] == s["bytes_total"] and o["max_requests"][i] == s["max_requests"]


def test_large_sweep_is_vectorised(lookup):
    t0 = time.perf_counter()
    o = calc({"model": "qwen3-8b", "tokens": list(range(100_000))}, lookup)
    assert len(o["bytes_per_request"]) == 100_000 and o["bytes_per_request"][-1] == 99_999 * 147_456
    assert time.perf_counter() - t0 < 5


def test_zero_tokens_and_zero_budget_are_valid(lookup):
    o = calc({"model": "qwen3-8b", "tokens": 0, "memory_budget_bytes": 0, "subtract_weights": False}, lookup)
    assert o["bytes_per_request"] == 0 and o["max_requests"] is None  # nothing to store: unbounded, reported as null
    z = calc({"model": "qwen3-8b", "tokens": 10, "memory_budget_bytes": 0, "subtract_weights": False}, lookup)
    assert z["max_requests"] == 0


def test_steps_and_assumptions_are_present(lookup):
    res = run("kv-cache", REGISTRY["kv-cache"].example, lookup)[2]
    assert len(res.steps) >= 4 and res.assumptions and res.sources
    assert all(s.substituted for s in res.steps)


# ---------------------------------------------------------------- validation

def test_model_and_architecture_are_exclusive(lookup):
    with pytest.raises(CalcInputError):
        calc({"model": "qwen3-8b", **arch(QWEN3_8B), "tokens": 1}, lookup)
    with pytest.raises(CalcInputError):
        calc({"tokens": 1})


def test_unknown_model_is_named():
    with pytest.raises(UnknownId) as e:
        calc({"model": "no-such-model", "tokens": 1})
    assert e.value.loc == ("model",)


@pytest.mark.parametrize("body", [
    {"tokens": -1, "model": "qwen3-8b"},
    {"tokens": 1, "model": "qwen3-8b", "kv_format": "int3"},
    {"tokens": 1, "model": "qwen3-8b", "surprise": 1},
    {"tokens": 1, "architecture": {"layer_groups": []}},
    {"tokens": 1, "architecture": {"layer_groups": [{"count": 1, "streams": [{"dim": 0}]}]}},
    {"tokens": 1, "model": "qwen3-8b", "kv_format": {"bits_per_value": float("nan")}},
    {"tokens": 1, "model": "qwen3-8b", "tp": 0},
])
def test_bad_input_is_refused(body):
    with pytest.raises(ValidationError):
        REGISTRY["kv-cache"].request_model.model_validate(body)


def test_semantic_errors_name_the_field(lookup):
    with pytest.raises(CalcInputError) as e:
        calc({**arch({"count": 1, "streams": [{"dim": 100}], "kv_heads": 3}), "tokens": 1, "tp": 2})
    assert e.value.loc == ("architecture.layer_groups.0.kv_heads",)
    with pytest.raises(CalcInputError):
        calc({"model": "qwen3-8b", "tokens": 1, "hardware": "h100-sxm", "memory_budget_bytes": 1}, lookup)
    mixed = run("kv-cache", {"model": "gpt-oss-120b", "tokens": 1, "hardware": "h100-sxm"}, lookup)[2]   # MXFP4 experts + BF16
    assert any("mixed-mxfp4-bf16" in a for a in mixed.assumptions)
    with pytest.raises(CalcInputError):
        calc({**arch(QWEN3_8B), "tokens": 1, "hardware": "h100-sxm"}, lookup)


def test_mismatched_sweeps_are_refused():
    with pytest.raises(CalcInputError):
        calc({**arch(QWEN3_8B), "tokens": [1, 2, 3], "requests": [1, 2]})


def test_huge_inputs_stay_finite():
    o = calc({**arch({"count": 10**6, "streams": [{"dim": 10**9}], "state_elements": 10**12}),
              "tokens": 10**15, "requests": 10**15, "kv_format": "fp32"})
    assert np.isfinite(o["bytes_total"])


# ---------------------------------------------------------------- headline and typed outputs

def test_headline_states_bytes_per_request_and_requests_that_fit(lookup):
    from calculators.framework.headline import fmt_bytes as hb
    _, _, res = run("kv-cache", {"model": "llama-3.1-70b", "tokens": 131072, "kv_format": "fp8", "tp": 8,
                                 "hardware": "h100-sxm"}, lookup)
    o = res.outputs
    assert res.headline.startswith("Llama 3.1 70B at 131,072 tokens in FP8 needs 21.5 GB (20.0 GiB) of KV cache per request")
    assert f"{o['max_requests']:,} requests fit on 8 × h100-sxm after the weights" in res.headline
    assert hb(o["per_device_bytes_per_request"]) in res.headline
    _, _, res = run("kv-cache", REGISTRY["kv-cache"].example, lookup)
    o = res.outputs
    for part in (hb(o["bytes_per_request"]), hb(o["bytes_total"]), f"{o['max_requests']} requests fit", hb(o["memory_budget_bytes"])):
        assert part in res.headline, part
    _, _, res = run("kv-cache", {**arch(QWEN3_8B), "tokens": [1024, 2048, 4096]}, no_lookup)
    assert res.headline.startswith("This architecture at 1,024 tokens") and "first of 3 points" in res.headline
    assert res.headline.endswith(".")


def test_headline_never_raises_on_edge_values():
    for body in ({**arch(QWEN3_8B), "tokens": 0, "requests": 0, "memory_budget_bytes": 0},
                 {**arch({"count": 0, "streams": []}), "tokens": 10, "memory_budget_bytes": 1e9},
                 {**arch({"count": 2, "state_elements": 100}), "tokens": 5, "requests": [1, 2]}):
        _, _, res = run("kv-cache", body, no_lookup)
        assert len(res.headline) > 20 and res.headline.endswith(".")
        REGISTRY["kv-cache"].outputs_model.model_validate(res.outputs)


def test_outputs_model_validates_every_example(lookup):
    c = REGISTRY["kv-cache"]
    bodies = [c.example, *c.extra_examples, {"model": "qwen3-8b", "tokens": [1024, 8192], "page_size_tokens": 16,
                                              "memory_budget_bytes": [1e9, 2e9]}]
    for body in bodies:
        _, _, res = run("kv-cache", body, lookup)
        c.outputs_model.model_validate(res.outputs)
    with pytest.raises(ValidationError):
        c.outputs_model.model_validate({**res.outputs, "undocumented": 1})


# ---------------------------------------------------------------- a memory budget holds the weights too (issue #28)

def test_budget_with_a_model_takes_its_weights_out_first(lookup):
    body = {"model": "qwen3-8b", "tokens": 8192, "memory_budget_bytes": 40 * GIB, "tp": 2}
    res = run("kv-cache", body, lookup)[2]
    w = run("weight-memory", {"model": "qwen3-8b"}, lookup)[2].outputs["bytes_total"]
    o = res.outputs
    assert o["memory_budget_bytes"] == pytest.approx(40 * GIB - w)
    assert o["max_requests"] == (40 * GIB - w) // o["bytes_per_request"]
    steps = {s.label: s.value for s in res.steps}
    assert steps["weights"] == pytest.approx(w) and steps["weights per rank"] == pytest.approx(w / 2)
    assert steps["KV budget"] == pytest.approx(40 * GIB - w)
    assert "after the weights" in res.headline
    # a budget that is already KV only keeps the old reading
    net = run("kv-cache", {**body, "subtract_weights": False}, lookup)[2].outputs
    assert net["memory_budget_bytes"] == 40 * GIB and net["max_requests"] == 40 * GIB // o["bytes_per_request"]
    # the weights in another format, or given as bytes
    fp8 = run("kv-cache", {**body, "weight_format": "fp8"}, lookup)[2].outputs
    w8 = run("weight-memory", {"model": "qwen3-8b", "weight_format": "fp8"}, lookup)[2].outputs["bytes_total"]
    assert fp8["memory_budget_bytes"] == pytest.approx(40 * GIB - w8) and w8 < w
    given = run("kv-cache", {**body, "weight_bytes": 10e9}, lookup)[2].outputs
    assert given["memory_budget_bytes"] == pytest.approx(40 * GIB - 10e9)


def test_budget_without_known_weights_and_the_refusals(lookup):
    a = {**arch(QWEN3_8B), "tokens": 8192, "memory_budget_bytes": 4 * GIB}
    res = run("kv-cache", a, no_lookup)[2]
    assert res.outputs["memory_budget_bytes"] == 4 * GIB                # no model: nothing known to take out
    assert any("no weights are known" in x for x in res.assumptions)
    assert run("kv-cache", {**a, "weight_bytes": GIB}, no_lookup)[2].outputs["memory_budget_bytes"] == 3 * GIB
    for body, field in (({**a, "subtract_weights": True}, "weight_bytes"),
                        ({**a, "weight_format": "fp8"}, "weight_format"),
                        ({"model": "qwen3-8b", "tokens": 1, "weight_format": "fp8"}, "weight_format"),
                        ({"model": "qwen3-8b", "tokens": 1, "subtract_weights": False}, "subtract_weights"),
                        ({"model": "qwen3-8b", "tokens": 1, "memory_budget_bytes": GIB, "subtract_weights": False,
                          "weight_bytes": 1}, "weight_bytes")):
        with pytest.raises(CalcInputError) as e:
            calc(body, lookup)
        assert e.value.loc == (field,), body
