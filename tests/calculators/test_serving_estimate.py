"""serving-estimate: the steady state of continuous batching against a step-by-step simulation, the laws every answer
must obey (Little's law, the floor below the estimate, monotone in load), the shared step model, and bad input.

Nothing here states what a deployment measures: accuracy against published runs is the validation's business
(knowledge/validation.py); these tests check that the arithmetic is what the method says.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from calculators.families.serving._serving_estimate_model import StepCurve, closed_loop, open_loop, simulate
from calculators.framework import CalcInputError
from tests.calculators.plain import compute as run

GRID = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512.0])


def curve(prefill_s: float, chunks: int = 1, slope: float = 5e-5) -> StepCurve:
    d = 0.010 + slope * GRID
    return StepCurve(GRID, d, 0.1 * d, prefill_s, 0.0, chunks)


@pytest.mark.parametrize("users, prefill_s, chunks", [(8, 0.03, 1), (64, 0.03, 1), (64, 0.12, 2), (48, 0.05, 1)])
def test_closed_loop_matches_a_step_by_step_simulation(users, prefill_s, chunks):
    c = curve(prefill_s, chunks)
    a = closed_loop(c, users, 256, slots=400)
    s = simulate(c, users, 256, slots=400, requests=max(12 * users, 300))
    assert a.step_s == pytest.approx(s["tpot_s"], rel=0.03)
    assert a.completion_rate_per_s == pytest.approx(s["completion_rate_per_s"], rel=0.04)
    assert a.ttft_mean_s == pytest.approx(s["ttft_s"], rel=0.05)


def test_closed_loop_beyond_the_slots_queues_for_them():
    c = curve(0.02)
    a = closed_loop(c, 300, 128, slots=100)
    s = simulate(c, 300, 128, slots=100, requests=1500)
    assert a.in_service == 100 and a.queue_wait_s > 0
    assert a.step_s == pytest.approx(s["tpot_s"], rel=0.03)
    assert a.ttft_mean_s == pytest.approx(s["ttft_s"], rel=0.1)


def test_littles_law_holds_in_the_closed_form():
    c = curve(0.04)
    for users in (1, 10, 100):
        a = closed_loop(c, users, 512, slots=1000)
        cycle = a.ttft_mean_s + 511 * a.step_s
        assert users == pytest.approx(a.completion_rate_per_s * cycle, rel=1e-6)


def test_open_loop_obeys_littles_law_and_refuses_an_overload():
    c = curve(0.03)
    a = open_loop(c, 2.0, 256, slots=1000, budget_share=0.125)
    assert a.stable
    assert a.decode_batch == pytest.approx(2.0 * 255 * a.step_s, rel=1e-6)
    assert a.ttft_p50_s <= a.ttft_p90_s <= a.ttft_p99_s
    over = open_loop(c, 1 / 0.03, 256, slots=1000, budget_share=0.125)
    assert not over.stable and math.isinf(over.ttft_mean_s)


DENSE = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "input_tokens": 1024, "output_tokens": 512}


def est(lookup, **kw):
    return run("serving-estimate", {**DENSE, **kw}, lookup)[2].outputs


def test_answers_obey_their_own_laws(lookup):
    prev = None
    for n in (1, 16, 128):
        o = est(lookup, concurrency=n)
        assert o["bound_tpot_s"] <= o["tpot_s"]["mean"]
        # closed loop: users = completions/s × (TTFT + (O − 1) × TPOT) when every user holds a slot
        cycle = o["ttft_s"]["mean"] + (DENSE["output_tokens"] - 1) * o["tpot_s"]["mean"]
        assert n == pytest.approx(o["requests_per_s"] * cycle, rel=1e-6)
        assert o["output_tokens_per_s"] == pytest.approx(o["requests_per_s"] * DENSE["output_tokens"], rel=1e-9)
        assert o["output_tokens_per_s_per_device"] == pytest.approx(o["output_tokens_per_s"] / 4, rel=1e-9)
        assert sum(o["step_shares"].values()) == pytest.approx(1.0, abs=1e-9)
        if prev is not None:      # more users: slower tokens, more of them
            assert o["tpot_s"]["mean"] > prev["tpot_s"]["mean"]
            assert o["output_tokens_per_s"] > prev["output_tokens_per_s"]
        prev = o


def test_replicas_scale_throughput_not_latency(lookup):
    one = est(lookup, concurrency=32)
    two = est(lookup, concurrency=64, replicas=2)
    assert two["tpot_s"]["mean"] == pytest.approx(one["tpot_s"]["mean"], rel=1e-9)
    assert two["output_tokens_per_s"] == pytest.approx(2 * one["output_tokens_per_s"], rel=1e-9)
    assert two["devices"] == 8


def test_offline_fills_the_slots_and_a_prefix_cache_shortens_ttft(lookup):
    off = est(lookup)
    assert off["load"] == "offline" and off["concurrency"] == pytest.approx(off["slots_per_engine"])
    cold, warm = est(lookup, concurrency=8), est(lookup, concurrency=8, prefix_hit_rate=0.9)
    assert warm["ttft_s"]["mean"] < cold["ttft_s"]["mean"]


def test_the_decode_step_is_the_shared_step_models(lookup):
    """D(1) of the curve is the step every other calculator answers for this split (kernels + link collectives)."""
    from calculators.domain import hardware_spec, layout_of
    from calculators.domain.records import as_model
    from calculators.families.serving._plan_search import weight_formats
    from calculators.framework import Result
    from calculators.perf import load_system, measured_system_of, rates_from_spec, step_times, tp_link

    o = est(lookup, concurrency=1)
    rec = as_model(lookup("model", "llama-3.1-70b"))
    hw = hardware_spec(lookup, "h100-sxm")
    link, _ = tp_link(lookup, Result(inputs={}, outputs={}), None, hw, 4)
    wf, _ = weight_formats(rec, None)
    ctx = DENSE["input_tokens"] + DENSE["output_tokens"] / 2
    st = step_times(layout_of(rec), rates_from_spec(hw), "decode", 1, 1, ctx, 4, 1, wf, "bf16",
                    load_system(lookup, measured_system_of(lookup, "h100-sxm"), hw), link)
    assert o["step_curve"]["decode_step_s"][0] == pytest.approx(float(st.measured_s.ravel()[0]), rel=0.01)
    assert o["step_curve"]["decode_step_bound_s"][0] == pytest.approx(float(st.bound_s.ravel()[0]), rel=0.01)


def test_an_unmeasured_gpu_borrows_the_kernels_of_the_measured_one_nearest_in_bandwidth(lookup):
    o = run("serving-estimate", {**DENSE, "hardware": "mi300x", "tp": 8, "concurrency": 4}, lookup)[2]
    assert o.outputs["basis"].startswith("proxy (") and "h200_sxm" in o.outputs["basis"]
    assert any("no measured kernels" in a and "h200-sxm" in a for a in o.assumptions)
    bound = run("serving-estimate", {**DENSE, "hardware": "mi300x", "tp": 8, "concurrency": 4, "estimate": "bound"},
                lookup)[2].outputs
    assert bound["basis"] == "bound" and o.outputs["tpot_s"]["mean"] > bound["tpot_s"]["mean"]
    with pytest.raises(CalcInputError) as e:        # 'measured' means this device's own tables
        run("serving-estimate", {**DENSE, "hardware": "mi300x", "tp": 8, "concurrency": 4, "estimate": "measured"}, lookup)
    assert e.value.loc[0] == "estimate"


def test_a_device_with_no_measured_device_near_it_keeps_the_bound(lookup):
    o = run("serving-estimate", {**DENSE, "hardware": "tpu-v6e", "tp": 8, "concurrency": 4}, lookup)[2]
    assert o.outputs["basis"] == "bound"
    assert any("no measured kernels" in a for a in o.assumptions)


@pytest.mark.parametrize("body, field", [
    ({"tp": 1}, "tp"),                                       # 70B in BF16 does not fit one H100
    ({"dp_attention": True}, "dp_attention"),               # dense model
    ({"tp": 3}, "tp"),                                       # does not divide the heads
    ({"input_tokens": 5_000_000, "output_tokens": 10}, "input_tokens"),   # one request's KV does not fit
])
def test_bad_deployments_are_422_naming_the_field(lookup, body, field):
    with pytest.raises(CalcInputError) as e:
        est(lookup, **body)
    assert e.value.loc[0] == field


def test_both_loads_at_once_is_refused(lookup):
    from pydantic import ValidationError
    with pytest.raises((ValidationError, CalcInputError)):
        est(lookup, concurrency=4, arrival_rate_per_s=1.0)


def test_a_long_simulated_run_converges_to_the_steady_state():
    from calculators.families.serving._serving_estimate_model import run
    c = curve(0.03)
    a = closed_loop(c, 64, 256, slots=400)
    r = run(c, 3200, 64, 1000, 256, 400, 8192, 1000, output_spread=0.5)
    assert r.tpot_mean_s == pytest.approx(a.step_s, rel=0.03)
    assert r.output_tokens / r.duration_s == pytest.approx(a.completion_rate_per_s * 256, rel=0.03)


def test_a_step_packing_many_prompts_costs_its_tokens_not_one_prompt_times_their_count():
    """A burst of 40 prompts of 100 tokens fits one 8,192-token step: the step costs N(4,000 tokens) − N(1) plus their
    own attention (the weight reads are made once), not 40 × one prompt's P (each of which pays the weight reads)."""
    from calculators.families.serving._serving_estimate_model import run
    tokens = np.array([1.0, 100, 1000, 4000, 10000])
    n_s = np.array([0.010, 0.0102, 0.020, 0.050, 0.110])        # weight reads, then compute
    c = StepCurve(GRID, 0.010 + 5e-5 * GRID, 0.0 * GRID, 0.0102 - 0.010 + 100 * 1e-6, 0.0, 1, tokens, n_s, 1e-6)
    r = run(c, 40, 40, 100, 2, 400, 8192, 100)
    first = float(c.decode(1)) + (0.050 - 0.010) + 4000 * 1e-6
    assert r.ttft_mean_s == pytest.approx(first, rel=1e-9)
    linear = float(c.decode(1)) + 40 * c.prefill(1)
    assert abs(linear - first) > 0.1 * first            # the old per-prompt pricing is a different number
    old = StepCurve(GRID, c.decode_s, c.decode_comm_s, c.prefill_s, 0.0, 1)
    assert run(old, 40, 40, 100, 2, 400, 8192, 100).ttft_mean_s == pytest.approx(linear, rel=1e-9)


def test_a_burst_is_simulated_and_its_first_requests_wait_for_the_prefills(lookup):
    burst = est(lookup, num_prompts=200)
    assert burst["load"] == "burst" and burst["method"] == "simulated run" and burst["duration_s"] > 0
    assert burst["ttft_s"]["p99"] > burst["ttft_s"]["p50"] > 0
    steady = est(lookup, concurrency=64)
    finite = est(lookup, concurrency=64, num_prompts=640)
    assert finite["method"] == "simulated run" and steady["method"] == "steady state"
    assert finite["tpot_s"]["mean"] == pytest.approx(steady["tpot_s"]["mean"], rel=0.1)
    assert finite["ttft_s"]["mean"] > steady["ttft_s"]["mean"]     # the first wave arrives at once


def test_a_run_too_long_to_simulate_is_refused_before_it_starts(lookup):
    with pytest.raises(CalcInputError) as e:
        est(lookup, num_prompts=100_000, output_tokens=100_000, concurrency=1)
    assert e.value.loc[0] == "num_prompts"


def test_an_answer_compares_itself_with_the_nearest_published_run(lookup):
    """The nearest stored point of the same model and accelerator is estimated the same way, and its error is the
    published figure against that estimate (not against this answer)."""
    from calculators.families.serving._benchmark_points import measured_figures
    body = {"model": "deepseek-r1", "hardware": "h200-sxm", "tp": 8, "framework": "sglang", "input_tokens": 1000,
            "output_tokens": 1000, "concurrency": 48}
    r = run("serving-estimate", body, lookup)[2]
    (near,) = r.outputs["nearest_measurements"]
    point = lookup("benchmark", near["id"])
    assert point["model"] == "deepseek-r1" and point["hardware"] == "h200-sxm"
    again = run("serving-estimate", near["request"], lookup)[2].outputs
    assert near["predicted"]["tpot_s"] == pytest.approx(again["tpot_s"]["mean"])
    meas = measured_figures(point)
    assert near["error"]["tpot_s"] == pytest.approx(near["predicted"]["tpot_s"] / meas["tpot_s"] - 1)
    assert any(a.startswith("Nearest published run: " + near["id"]) for a in r.assumptions)


def test_without_a_stored_run_nearby_the_answer_says_it_is_not_validated(lookup):
    r = run("serving-estimate", {"model": "qwen3-8b", "hardware": "l40s", "input_tokens": 512, "output_tokens": 128,
                                 "concurrency": 4}, lookup)[2]
    assert r.outputs["nearest_measurements"] == []
    assert any("not validated" in a for a in r.assumptions)


def test_an_engine_that_does_not_mix_prefill_into_decode_steps_stalls_its_decodes():
    """SGLang without --enable-mixed-chunk: while prompts wait, a step prefills only, so a burst's decodes wait (TPOT
    up) and the run takes longer than with mixed steps of the same budget."""
    from calculators.families.serving._serving_estimate_model import run
    c = curve(0.03)
    mixed = run(c, 400, 400, 1000, 64, 100, 2048, 1000, output_spread=0.5)
    apart = run(c, 400, 400, 1000, 64, 100, 2048, 1000, output_spread=0.5, mixed=False)
    assert apart.tpot_mean_s > mixed.tpot_mean_s
    assert apart.duration_s > mixed.duration_s


@pytest.mark.parametrize("prompts, users, spread, slots, mixed", [
    (300, 4, 0.0, 400, True),          # a long closed loop at low concurrency (the spans are long)
    (400, 32, 0.5, 400, True),         # lengths spread: requests finish one by one
    (200, 200, 0.5, 64, True),         # a burst capped by the slots: admissions wait for finishes
    (150, 16, 0.3, 400, False),        # an engine that does not mix prefill into decode steps
])
def test_taking_pure_decode_spans_at_once_is_the_same_run_as_step_by_step(prompts, users, spread, slots, mixed):
    """`run(skip_spans=True)` jumps over spans of decode steps in which nobody finishes or is admitted; every figure
    of the run equals the step-by-step loop's (to rounding), including the step count."""
    from calculators.families.serving._serving_estimate_model import run
    c = curve(0.03)
    args = (c, prompts, users, 900, 120, slots, 2048, 900)
    kw = dict(output_spread=spread, input_spread=spread, mixed=mixed)
    fast, slow = run(*args, **kw), run(*args, skip_spans=False, **kw)
    assert fast.steps == slow.steps
    for name in fast.__dataclass_fields__:
        assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-9, abs=1e-12), name
