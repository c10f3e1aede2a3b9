"""serving-estimate with speculative decoding: a step verifies k drafts + 1 position per sequence and drafts the next k;
it yields E = (1 − α^(k+1)) / (1 − α) tokens per sequence, so TPOT = step ÷ E.

These tests check the arithmetic against itself and against the plain estimate (no speculation): pure overhead at
α = 0, k + 1 tokens per step at α = 1, the E formula against a Monte Carlo of the acceptance, the refusal of MTP on
a model without MTP modules, and the simulated run against the steady state. What acceptance a deployment sees is an
input, never checked here.
"""
from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from calculators.families.serving._serving_estimate_spec import alpha_for
from calculators.families.serving._speculative_step import expected_tokens
from calculators.framework import CalcInputError
from tests.calculators.plain import compute as run

DENSE = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "input_tokens": 1024, "output_tokens": 512}


def est(lookup, **kw):
    return run("serving-estimate", {**DENSE, **kw}, lookup)[2]


@pytest.mark.parametrize("method, extra", [("eagle", {}), ("draft-model", {"draft_model": "llama-3.1-8b"}),
                                           ("ngram", {})])
def test_no_acceptance_is_pure_overhead(lookup, method, extra):
    """α = 0: every step verifies k + 1 positions and drafts k tokens for one token per sequence."""
    for c in (1, 64):
        plain = est(lookup, concurrency=c).outputs
        o = est(lookup, concurrency=c, speculative={"method": method, "draft_tokens": 3, "acceptance_rate": 0.0,
                                                      **extra}).outputs
        s = o["speculative"]
        assert s["expected_tokens_per_step"] == 1.0
        assert s["verify_step_s"] > s["plain_step_s"]          # B × 4 GEMM rows, 4 queries of attention
        assert (s["draft_s"] > 0) == (method != "ngram")
        assert o["tpot_s"]["mean"] > plain["tpot_s"]["mean"]
        assert o["output_tokens_per_s"] < plain["output_tokens_per_s"]
        assert o["itl_s"]["mean"] == pytest.approx(o["tpot_s"]["mean"], rel=1e-9)    # one token per step
    if method == "draft-model":       # the draft's weights and KV take slots
        assert o["slots_per_engine"] < plain["slots_per_engine"]
        assert s["draft_weights_per_device_bytes"] > 0 and s["draft_kv_bytes_per_request_per_device"] > 0
        assert o["weights_per_device_bytes"] == pytest.approx(plain["weights_per_device_bytes"]
                                                              + s["draft_weights_per_device_bytes"], rel=1e-9)


def test_full_acceptance_approaches_k_plus_one_tokens_per_step(lookup):
    k = 3
    prev = None
    for a in (0.5, 0.9, 0.99, 1.0):
        o = est(lookup, concurrency=8, speculative={"method": "ngram", "draft_tokens": k, "acceptance_rate": a}).outputs
        per_step = o["itl_s"]["mean"] / o["tpot_s"]["mean"]          # tokens a sequence gains per step
        assert per_step == pytest.approx(o["speculative"]["expected_tokens_per_step"], rel=1e-6)
        if prev is not None:
            assert per_step > prev
        prev = per_step
    assert per_step == pytest.approx(k + 1, rel=1e-9)
    # and Little's law still holds over the real output tokens: users = X × (TTFT + (O − 1) × TPOT)
    cycle = o["ttft_s"]["mean"] + (DENSE["output_tokens"] - 1) * o["tpot_s"]["mean"]
    assert 8 == pytest.approx(o["requests_per_s"] * cycle, rel=1e-6)
    assert o["output_tokens_per_s"] == pytest.approx(o["requests_per_s"] * DENSE["output_tokens"], rel=1e-9)
    assert o["bound_tpot_s"] <= o["tpot_s"]["mean"]
    plain = est(lookup, concurrency=8).outputs
    # k + 1 tokens per step at a step of V + Q: the throughput gain is (k + 1) × plain step ÷ speculative step
    gain = o["output_tokens_per_s"] / plain["output_tokens_per_s"]
    assert 1.5 < gain < k + 1


def test_expected_tokens_is_the_truncated_geometric_sum():
    rng = np.random.default_rng(7)
    for a, k in ((0.0, 4), (0.3, 1), (0.7, 3), (0.85, 5), (1.0, 2)):
        e = float(expected_tokens(a, k))
        assert e == pytest.approx(sum(a ** i for i in range(k + 1)), rel=1e-12)
        if a < 1:
            assert e == pytest.approx((1 - a ** (k + 1)) / (1 - a), rel=1e-12)
        # Monte Carlo: drafts accepted in order until the first rejection, plus the target's own token
        acc = rng.random((200_000, k)) < a
        tokens = 1 + np.cumprod(acc, axis=1).sum(axis=1)
        assert tokens.mean() == pytest.approx(e, abs=4 * tokens.std() / np.sqrt(tokens.size) + 1e-12)
        if 0 < a < 1:        # mean accepted drafts per step give back the same α
            assert alpha_for(e - 1, k) == pytest.approx(a, abs=1e-9)


def test_mean_accepted_tokens_is_the_same_as_its_alpha(lookup):
    a, k = 0.7, 3
    by_alpha = est(lookup, concurrency=16, speculative={"method": "eagle", "draft_tokens": k, "acceptance_rate": a})
    by_mean = est(lookup, concurrency=16, speculative={"method": "eagle", "draft_tokens": k,
                                                         "mean_accepted_tokens": float(expected_tokens(a, k)) - 1})
    assert by_mean.outputs["speculative"]["acceptance_rate"] == pytest.approx(a, abs=1e-9)
    assert by_mean.outputs["tpot_s"]["mean"] == pytest.approx(by_alpha.outputs["tpot_s"]["mean"], rel=1e-9)
    assert by_mean.outputs["speculative"]["acceptance_given_as"] == "mean_accepted_tokens"
    text = " ".join(by_alpha.assumptions)
    assert "never fitted" in text and "k = 3" in text
    assert "speculative (eagle, k = 3, α = 0.7" in by_alpha.headline


def test_mtp_drafts_with_the_models_own_modules(lookup):
    body = {"model": "mimo-7b-base", "hardware": "h100-sxm", "input_tokens": 1024, "output_tokens": 512,
            "concurrency": 32}
    plain = run("serving-estimate", body, lookup)[2].outputs
    o = run("serving-estimate", {**body, "speculative": {"method": "mtp", "acceptance_rate": 0.85}}, lookup)[2].outputs
    s = o["speculative"]
    assert s["draft_tokens"] == 1 and s["expected_tokens_per_step"] == pytest.approx(1.85)   # one MTP module
    assert 0 < s["draft_s"] < 0.1 * s["verify_step_s"]           # one layer of 36 (+ projection and LM head)
    assert s["draft_weights_per_device_bytes"] > 0 and o["slots_per_engine"] < plain["slots_per_engine"]
    assert o["tpot_s"]["mean"] < plain["tpot_s"]["mean"]


@pytest.mark.parametrize("spec, field", [
    ({"method": "mtp", "acceptance_rate": 0.8}, ("speculative", "method")),             # Llama ships no MTP module
    ({"method": "eagle", "acceptance_rate": 0.8}, ("speculative", "draft_tokens")),      # k has no default here
    ({"method": "ngram", "draft_tokens": 2, "mean_accepted_tokens": 2.5}, ("speculative", "mean_accepted_tokens")),
    ({"method": "draft-model", "draft_model": "no-such-model", "draft_tokens": 2, "acceptance_rate": 0.5},
     ("speculative", "draft_model")),
])
def test_bad_speculation_is_422_naming_the_field(lookup, spec, field):
    with pytest.raises(CalcInputError) as e:
        est(lookup, concurrency=4, speculative=spec)
    assert e.value.status == 422 and tuple(e.value.loc) == field


@pytest.mark.parametrize("spec", [
    {"method": "ngram", "draft_tokens": 2},                                           # no acceptance: it is an input
    {"method": "ngram", "draft_tokens": 2, "acceptance_rate": 0.5, "mean_accepted_tokens": 1.0},
    {"method": "draft-model", "draft_tokens": 2, "acceptance_rate": 0.5},            # which draft?
    {"method": "eagle", "draft_tokens": 2, "acceptance_rate": 0.5, "draft_model": "llama-3.1-8b"},
])
def test_acceptance_and_the_draft_must_be_given(lookup, spec):
    with pytest.raises(ValidationError):
        est(lookup, concurrency=4, speculative=spec)


def test_the_simulated_run_agrees_with_the_steady_state(lookup):
    spec = {"method": "eagle", "draft_tokens": 3, "acceptance_rate": 0.7}
    steady = est(lookup, concurrency=16, output_tokens=256, speculative=spec).outputs
    sim = est(lookup, concurrency=16, output_tokens=256, num_prompts=1600, output_tokens_spread=0.5,
              speculative=spec).outputs
    assert sim["method"] == "simulated run" and steady["method"] == "steady state"
    assert sim["tpot_s"]["mean"] == pytest.approx(steady["tpot_s"]["mean"], rel=0.03)
    assert sim["output_tokens_per_s"] == pytest.approx(steady["output_tokens_per_s"], rel=0.03)
    assert sim["itl_s"]["mean"] == pytest.approx(steady["itl_s"]["mean"], rel=0.03)
