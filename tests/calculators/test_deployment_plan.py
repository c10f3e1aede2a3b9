"""The deployment planner, checked from first principles: memory, TP validity, SLOs, replicas, cost, optimality."""
from __future__ import annotations

import math

import pytest

from calculators.framework import GIB, CalcInputError
from calculators.framework.runner import compute
from knowledge.loader import catalog_lookup, default_catalog

LOOKUP = catalog_lookup(default_catalog())
PRICES = {"h100-sxm": 2.49, "h200-sxm": 3.49, "b200-sxm": 5.99}
TRAFFIC = {"hardware": ["h100-sxm", "h200-sxm", "b200-sxm"], "arrival_rate_per_s": 10, "input_tokens": 2000,
           "output_tokens": 500, "ttft_s": 2.0, "tpot_s": 0.05, "price_per_device_hour_usd": PRICES}
CAPACITY = {"h100-sxm": 80 * GIB, "h200-sxm": 141 * GIB, "b200-sxm": 180 * GIB}   # binary HBM, per device


def plan(body: dict) -> dict:
    return compute("deployment-plan", body, LOOKUP)[2].outputs


@pytest.fixture(scope="module")
def llama():
    return plan({"model": "llama-3.1-70b", **TRAFFIC})


def test_llama_70b_best_plan_fits_memory_from_first_principles(llama):
    best = llama["best"]
    assert best is not None and best["meets_slo"] and best["fits"]
    # Llama 3.1 70B: 80 layers, 64 heads, 8 KV heads of 128, hidden 8192, FFN 28672, vocab 128256, BF16 weights
    L, H, KV, hd, d, f, V = 80, 64, 8, 128, 8192, 28672, 128256
    params = L * (d * H * hd + 2 * d * KV * hd + H * hd * d + 3 * d * f + 2 * d) + 2 * V * d + d
    tp = best["tp"] * best["pp"]
    weights_dev = params * 2 / tp
    kv_heads_per_rank = math.ceil(KV / best["tp"])          # a KV head is replicated when tp > 8
    kv_per_token_dev = L * 2 * kv_heads_per_rank * hd * 2 / best["pp"]
    kv_dev = best["batch"] * (2000 + 500) * kv_per_token_dev
    assert weights_dev + kv_dev <= 0.9 * CAPACITY[best["hardware"]] * (1 + 1e-6)
    assert best["memory_per_device_bytes"]["total"] == pytest.approx(weights_dev + kv_dev, rel=0.01)


def test_every_tp_degree_is_valid(llama):
    for c in llama["candidates"]:
        if c["fits"]:
            assert 64 % c["tp"] == 0 and (8 % c["tp"] == 0 or c["tp"] % 8 == 0)


def test_best_meets_both_slos_and_its_cost_adds_up(llama):
    best = llama["best"]
    assert best["ttft_s"] <= 2.0 and best["tpot_s"] <= 0.05
    devices = best["total_devices"]
    assert best["cost_per_hour_usd"] == pytest.approx(devices * PRICES[best["hardware"]])
    assert best["cost_per_mtok_usd"] == pytest.approx(best["cost_per_hour_usd"] / (10 * 500 * 3600) * 1e6)
    if best["mode"] == "aggregated":
        assert devices == best["replicas"] * best["tp"] * best["pp"]
        # the replicas hold the decode load: λ × output tokens × step time ≤ replicas × batch slots
        assert 10 * 500 * best["decode_step_s"] <= best["replicas"] * best["batch"] * best["pp"]


def test_no_cheaper_candidate_meets_the_slos(llama):
    best = llama["best"]
    cheaper = [c for c in llama["candidates"] if c["meets_slo"] and c["cost_per_mtok_usd"] is not None
               and c["cost_per_mtok_usd"] < best["cost_per_mtok_usd"] - 1e-12]
    assert cheaper == []
    assert llama["configurations_evaluated"] == len(llama["candidates"])
    assert llama["headline"].startswith("Serve Llama 3.1 70B") and "$" in llama["headline"]


def test_pareto_is_a_frontier(llama):
    front = llama["pareto"]
    assert front
    for a in front:
        assert not any(b["tokens_per_s_per_device"] > a["tokens_per_s_per_device"]
                       and b["tokens_per_s_per_user"] > a["tokens_per_s_per_user"] for b in llama["candidates"] if b["fits"]
                       and b["tokens_per_s_per_device"])


def test_a_moe_model_plans_with_valid_expert_parallelism():
    o = plan({"model": "qwen3-30b-a3b", **TRAFFIC})
    assert o["best"] is not None and o["best"]["meets_slo"]
    for c in o["candidates"]:
        assert 128 % c["ep"] == 0 and c["tp"] % c["ep"] == 0


def test_nothing_meets_says_which_constraint_fails():
    o = plan({"model": "llama-3.1-70b", **TRAFFIC, "tpot_s": 0.001})
    assert o["best"] is None and "TPOT fails everywhere" in o["why"] and o["headline"].startswith("No configuration")


def test_no_price_is_never_zero():
    o = plan({"model": "llama-3.1-8b", **{k: v for k, v in TRAFFIC.items() if k != "price_per_device_hour_usd"},
              "hardware": ["h800-sxm"], "estimate": "bound"})
    assert all(c["cost_per_mtok_usd"] is None for c in o["candidates"])
    assert o["best"] is None and "price" in o["why"]


def test_disaggregated_plans_have_both_pools():
    o = plan({"model": "llama-3.1-70b", **TRAFFIC, "mode": "disaggregated"})
    ok = [c for c in o["candidates"] if c["meets_slo"]]
    assert ok
    for c in ok:
        assert c["prefill_pool"]["devices"] + c["decode_pool"]["devices"] == c["total_devices"]
        assert c["ttft_s"] == pytest.approx(c["prefill_pool"]["ttft_s"])


def test_stored_prices_are_used_and_cited():
    o = compute("deployment-plan", {"model": "llama-3.1-70b", **{k: v for k, v in TRAFFIC.items()
                                                                if k != "price_per_device_hour_usd"}}, LOOKUP)
    best = o[2].outputs["best"]
    from calculators.domain import choose_device_price
    from tests.conftest import PRICE_AS_OF

    choice = choose_device_price(LOOKUP("gpu_prices", best["hardware"]), PRICE_AS_OF)
    assert best["cost_per_hour_usd"] == pytest.approx(best["total_devices"] * choice.best["device_usd_per_hour"]["value"])
    assert choice.best["provider"] in best["price_source"] and choice.best["date"] in best["price_source"]
    assert any(s["field"] == "device_usd_per_hour" for s in o[2].sources)


def test_unmeasured_hardware_competes_on_its_proxys_kernels():
    from calculators.families.serving._benchmark_points import fitted_factor

    o = plan({"model": "llama-3.1-70b", **TRAFFIC, "hardware": ["h100-sxm", "mi300x"],
              "price_per_device_hour_usd": {"h100-sxm": 2.49, "mi300x": 1.99}})
    mi = [c for c in o["candidates"] if c["hardware"] == "mi300x"]
    assert fitted_factor(LOOKUP, "mi300x", "vllm", "proxy") is None        # a catalog lookup holds no fitted factors
    assert mi and all(c["step_source"].startswith("proxy (") and "h200_sxm" in c["step_source"]
                      and "calibration factor" not in c["step_source"] for c in mi)
    assert any(c["figures"] == "serving-estimate" for c in mi)             # re-estimated like measured hardware


def test_search_space_is_bounded():
    with pytest.raises(CalcInputError):
        plan({"model": "llama-3.1-70b", **TRAFFIC, "batch": list(range(1, 2049)), "tp": list(range(1, 17)), "pp": list(range(1, 5))})
    assert math.isfinite(1.0)


def test_headline_is_the_envelope_headline_with_the_cost(llama):
    from calculators.framework.headline import fmt_usd
    res = compute("deployment-plan", {"model": "llama-3.1-70b", **TRAFFIC}, LOOKUP)[2]
    assert res.headline == res.outputs["headline"] == llama["headline"]
    best = llama["best"]
    assert fmt_usd(best["cost_per_mtok_usd"]) in res.headline and f"{best['total_devices']} × {best['hardware']}" in res.headline
    assert res.headline.endswith(".")


def test_outputs_model_validates(llama):
    from calculators.framework.registry import REGISTRY
    model = REGISTRY["deployment-plan"].outputs_model
    model.model_validate(llama)
    res = compute("deployment-plan", REGISTRY["deployment-plan"].example, LOOKUP)[2]
    model.model_validate(res.outputs)
    assert {p["mode"] for p in llama["candidates"]} == {"aggregated", "disaggregated"}


R1 = {"model": "deepseek-r1", "hardware": ["h200-sxm"], "tp": [8], "batch": [8, 64], "arrival_rate_per_s": 2,
      "input_tokens": 2000, "output_tokens": 500, "ttft_s": 5.0, "tpot_s": 0.1, "estimate": "bound",
      "price_per_device_hour_usd": {"h200-sxm": 3.49}}


@pytest.fixture(scope="module")
def r1():
    res = compute("deployment-plan", R1, LOOKUP)[2]
    return res.outputs, res.assumptions


def test_dp_attention_candidates_for_deepseek_r1_on_8_h200(r1):
    out, notes = r1
    dp = [c for c in out["candidates"] if c["dp_attention"]]
    tp = [c for c in out["candidates"] if not c["dp_attention"]]
    assert dp and tp and all(c["tp"] == c["ep"] == 8 for c in dp)
    assert any(c["fits"] for c in dp) and any("DP attention" in a for a in notes)
    # the MLA latent cache (61 layers × (512 + 64) values, BF16) is replicated on every rank under TP, while each
    # DP-attention rank keeps only the whole cache of its own batch / 8 sequences
    per_request = 61 * (512 + 64) * 2 * (2000 + 500)
    for c in out["candidates"]:
        rank_requests = math.ceil(c["batch"] / 8) if c["dp_attention"] else c["batch"]
        assert c["memory_per_device_bytes"]["kv"] == pytest.approx(rank_requests * per_request, rel=1e-9)
    # attention weights are replicated under DP attention
    w = {(c["dp_attention"], c["ep"]) : c["memory_per_device_bytes"]["weights"] for c in out["candidates"]}
    assert w[(True, 8)] > w[(False, 8)]


def test_dp_attention_option_restricts_the_search():
    only = plan({**R1, "dp_attention": "on", "mode": "aggregated"})
    assert only["candidates"] and all(c["dp_attention"] for c in only["candidates"])
    off = plan({**R1, "dp_attention": "off", "mode": "aggregated"})
    assert off["candidates"] and not any(c["dp_attention"] for c in off["candidates"])
    # a dense model has no DP-attention candidate, and asking for one is a 422 naming the field
    dense = plan({"model": "llama-3.1-70b", **TRAFFIC, "batch": [8], "estimate": "bound"})
    assert not any(c["dp_attention"] for c in dense["candidates"])
    with pytest.raises(CalcInputError) as exc:
        plan({"model": "llama-3.1-70b", **TRAFFIC, "dp_attention": "on"})
    assert exc.value.loc == ("dp_attention",)


def test_mtp_is_off_by_default_and_said(r1):
    out, notes = r1
    assert all(c["tokens_per_step"] == 1 for c in out["candidates"])
    assert any("MTP" in a and "off" in a for a in notes)
    res = compute("deployment-plan", {**R1, "mtp": True, "mode": "disaggregated"}, LOOKUP)[2]
    on = res.outputs["candidates"]
    alpha = 0.85                                        # the stated default acceptance
    assert any("MTP on" in a and "0.85" in a for a in res.assumptions)
    for c in on:
        assert c["tokens_per_step"] == pytest.approx(1 + alpha)
        assert c["tpot_s"] == pytest.approx(c["decode_step_s"] / (1 + alpha))
    # the MTP module's weights and KV are counted, and each step does more work
    base = {(c["dp_attention"], c["ep"], c["batch"]): c for c in out["candidates"] if c["mode"] == "disaggregated"}
    for c in on:
        b = base[(c["dp_attention"], c["ep"], c["batch"])]
        assert c["memory_per_device_bytes"]["weights"] > b["memory_per_device_bytes"]["weights"]
        assert c["memory_per_device_bytes"]["kv"] > b["memory_per_device_bytes"]["kv"]
        assert c["decode_step_s"] > b["decode_step_s"]
    half = plan({**R1, "mtp": True, "mtp_acceptance_rate": 0.5, "mode": "disaggregated"})
    assert half["candidates"][0]["tokens_per_step"] == pytest.approx(1.5)
    with pytest.raises(CalcInputError) as exc:
        plan({"model": "llama-3.1-70b", **TRAFFIC, "mtp": True})
    assert exc.value.loc == ("mtp",)


def test_skewed_routing_costs_at_least_uniform_and_is_said():
    body = {"model": "qwen3-235b-a22b", "hardware": ["h200-sxm"], "tp": [8], "ep": [8], "batch": [1, 32],
            "arrival_rate_per_s": 1, "input_tokens": 4000, "output_tokens": 200, "ttft_s": 10, "tpot_s": 1,
            "estimate": "bound", "mode": "aggregated", "dp_attention": "off"}
    uniform = compute("deployment-plan", body, LOOKUP)[2]
    skewed = compute("deployment-plan", {**body, "expert_skew": 1.2}, LOOKUP)[2]
    for u, s in zip(uniform.outputs["candidates"], skewed.outputs["candidates"]):
        assert (u["tp"], u["ep"], u["batch"]) == (s["tp"], s["ep"], s["batch"])
        assert s["prefill_s"] >= u["prefill_s"]                          # the hottest expert rank sets the pace
    assert any("Zipf" in a for a in skewed.assumptions) and any("uniform" in a for a in uniform.assumptions)
    assert skewed.outputs["candidates"][0]["prefill_s"] > 1.1 * uniform.outputs["candidates"][0]["prefill_s"]


def test_dp_and_mtp_answers_validate_against_the_outputs_model(r1):
    from calculators.framework.registry import REGISTRY
    model = REGISTRY["deployment-plan"].outputs_model
    model.model_validate(r1[0])
    model.model_validate(plan({**R1, "mtp": True, "expert_skew": 0.8}))
