"""routing-cost: the book's routing and single-agent serving examples, plus invariants and validation."""
from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, UnknownId, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

A = {"name": "A", "price_per_million_tokens_usd": {"input": 1, "cache_read": 0.1, "output": 4},
     "usage": {"prefix_tokens": 19000, "new_input_tokens": 1000, "output_tokens": 2000},
     "pass_rate": 0.8, "prefix_hit_rate": 1.0, "latency_s": {"hit": 10, "miss": 10}}
B = {"name": "B", "price_per_million_tokens_usd": {"input": 2, "cache_read": 0.2, "output": 8},
     "usage": {"prefix_tokens": 19000, "new_input_tokens": 1000, "output_tokens": 300},
     "pass_rate": 0.98, "prefix_hit_rate": 0.5, "latency_s": {"hit": 4, "miss": 12}}
BOOK = {"tasks": 1000, "candidates": [A, B]}
DEADLINE = {"min_pass_rate": 0.75, "deadline_s": 6, "min_fraction_passed_on_time": 0.9}


def calc(body, lookup=no_lookup):
    return run("routing-cost", body, lookup)[2].outputs


def with_b(**patch):
    body = copy.deepcopy(BOOK)
    body["candidates"][1].update(patch)
    return body


def test_book_costs_per_call_and_per_success():
    o = calc(BOOK)
    a, b = o["candidates"]
    assert [a["name"], b["name"]] == ["A", "B"]
    assert a["cost_per_call_hit"] == pytest.approx(0.0109)
    assert a["cost_per_call_miss"] == pytest.approx(0.028)
    assert b["cost_per_call_hit"] == pytest.approx(0.0082)
    assert b["cost_per_call_miss"] == pytest.approx(0.0424)
    assert a["cost_total"] == pytest.approx(10.9)
    assert a["cost_per_success"] == pytest.approx(0.013625)
    assert b["cost_total"] == pytest.approx(25.3)                 # half the calls hit
    assert b["cost_per_success"] == pytest.approx(0.0258163, abs=1e-7)
    assert calc(with_b(prefix_hit_rate=1.0))["candidates"][1]["cost_per_success"] == pytest.approx(0.00836735, abs=1e-8)


def test_book_break_even_is_1291_over_1520():
    o = calc(BOOK)
    pairs = {(p["x"], p["y"]): p for p in o["break_even"]}
    assert set(pairs) == {("A", "B"), ("B", "A")}
    assert pairs[("B", "A")]["hit_rate"] == pytest.approx(1291 / 1520, rel=1e-12)
    assert pairs[("B", "A")]["x_cheaper_when"] == "above"


def test_book_deadline_needs_91_8367_percent_hits():
    o = calc({**BOOK, "requirement": DEADLINE})
    a, b = o["candidates"]
    assert a["feasible"] is False and a["min_hit_rate_for_deadline"] is None
    assert b["min_hit_rate_for_deadline"] == pytest.approx(0.9 / 0.98)
    assert round(b["min_hit_rate_for_deadline"] * 100, 4) == 91.8367
    assert b["feasible"] is False                                  # h = 0.5 is not enough
    assert o["cheapest_feasible"] is None
    o2 = calc({**with_b(prefix_hit_rate=[0.5, 0.9, 0.9183673469387755, 1.0]), "requirement": DEADLINE})
    assert o2["candidates"][1]["feasible"] == [False, False, True, True]
    assert o2["cheapest_feasible"] == [None, None, "B", "B"]


def test_single_agent_serving_points_choose_16_workers():
    speeds = {1: 38.60, 4: 35.51, 16: 32.80, 64: 17.54}
    cands = [{"name": f"B{b}", "self_hosted": {"price_per_hour_usd": 2.09, "workers": b}, "tokens_per_s": r,
              "usage": {"output_tokens": 1e6}} for b, r in speeds.items()]
    o = calc({"candidates": cands, "requirement": {"min_tokens_per_s": 30}})
    monthly = [c["monthly_cost"] for c in o["candidates"]]
    assert monthly == pytest.approx([1504.8, 376.2, 94.05, 23.5125])
    assert o["candidates"][0]["monthly_output_tokens"] == pytest.approx(38.60 * 2.592e6)
    assert [round(c["price_per_million_tokens_usd"]["output"], 2) for c in o["candidates"]] == [15.04, 4.09, 1.11, 0.52]
    assert [c["feasible"] for c in o["candidates"]] == [True, True, True, False]
    assert o["cheapest_feasible"] == "B16"


def test_thinking_tokens_cost_and_estimated_time():
    cands = [{"name": n, "price_per_million_tokens_usd": {"input": 2, "output": 10},
              "usage": {"new_input_tokens": 10000, "output_tokens": out}, "tokens_per_s": r, "fixed_latency_s": 1}
             for n, out, r in (("100", 300, 50), ("1000", 1200, 150))]
    o = calc({"candidates": cands})
    assert [c["cost_per_call"] for c in o["candidates"]] == pytest.approx([0.023, 0.032])
    assert [c["latency_s"]["hit"] for c in o["candidates"]] == pytest.approx([7, 9])


def test_cache_write_tokens_replace_input_price_on_a_miss():
    b = {"name": "W", "price_per_million_tokens_usd": {"input": 2, "cache_read": 0.2, "cache_write": 2.5, "output": 10},
         "usage": {"prefix_tokens": 8000, "new_input_tokens": 2000, "cache_write_tokens": 8000}}
    c = calc({"candidates": [b]})["candidates"][0]
    assert c["cost_per_call_miss"] == pytest.approx((8000 * 2.5 + 2000 * 2) / 1e6)
    assert c["cost_per_call_hit"] == pytest.approx((8000 * 0.2 + 2000 * 2) / 1e6)


def test_price_id_from_the_store_is_cited():
    rec = {"id": "p", "input_usd_per_mtok": {"value": 3.0, "source": "s", "locator": "table"},
           "output_usd_per_mtok": {"value": 15.0, "source": "s", "locator": "table"}}

    def lookup(kind, ident):
        if (kind, ident) == ("price", "p"):
            return rec
        raise KeyError(ident)

    _, _, res = run("routing-cost", {"candidates": [{"name": "x", "price": "p", "usage": {"output_tokens": 1e6}}]}, lookup)
    assert res.outputs["candidates"][0]["cost_per_call"] == pytest.approx(15.0)
    assert {s["field"] for s in res.sources} == {"input_usd_per_mtok", "output_usd_per_mtok"}
    with pytest.raises(UnknownId):
        run("routing-cost", {"candidates": [{"name": "x", "price": "nope"}]}, lookup)


def test_zero_pass_rate_gives_null_cost_per_success_not_a_crash():
    o = calc(with_b(pass_rate=0.0))
    assert o["candidates"][1]["cost_per_success"] is None
    assert all(p["hit_rate"] is None for p in o["break_even"] if p["x"] == "B")


@settings(max_examples=60, deadline=None)
@given(hs=st.lists(st.floats(0, 1), min_size=1, max_size=12))
def test_sweep_matches_scalar_calls(hs):
    swept = calc(with_b(prefix_hit_rate=hs))
    for i, h in enumerate(hs):
        one = calc(with_b(prefix_hit_rate=h))
        assert swept["candidates"][1]["cost_per_success"][i] == pytest.approx(one["candidates"][1]["cost_per_success"])
        want = one["break_even"][0]["hit_rate"]  # A's break-even depends on B's swept hit rate
        got = swept["break_even"][0]["hit_rate"][i]
        assert (got is None) if want is None else got == pytest.approx(want)


@settings(max_examples=60, deadline=None)
@given(h1=st.floats(0, 1), h2=st.floats(0, 1))
def test_more_hits_never_cost_more_when_reads_are_cheaper(h1, h2):
    lo, hi = sorted((h1, h2))
    a = calc(with_b(prefix_hit_rate=lo))["candidates"][1]["cost_per_success"]
    b = calc(with_b(prefix_hit_rate=hi))["candidates"][1]["cost_per_success"]
    assert b <= a + 1e-15


@settings(max_examples=60, deadline=None)
@given(ha=st.floats(0, 1), pa=st.floats(0.05, 1), pb=st.floats(0.05, 1))
def test_break_even_hit_rate_equalises_cost_per_success(ha, pa, pb):
    body = copy.deepcopy(BOOK)
    body["candidates"][0].update(prefix_hit_rate=ha, pass_rate=pa)
    body["candidates"][1]["pass_rate"] = pb
    o = calc(body)
    h = next(p["hit_rate"] for p in o["break_even"] if p["x"] == "B")
    if h is None:
        return
    body["candidates"][1]["prefix_hit_rate"] = h
    o2 = calc(body)
    assert o2["candidates"][1]["cost_per_success"] == pytest.approx(o2["candidates"][0]["cost_per_success"], rel=1e-9)


@pytest.mark.parametrize("body, loc", [
    ({"candidates": [{"name": "x"}]}, ("candidates", 0, "price_per_million_tokens_usd")),
    ({"candidates": [{"name": "x", "price_per_million_tokens_usd": {"input": 1, "output": 1},
                      "self_hosted": {"price_per_hour_usd": 1}, "tokens_per_s": 1}]}, ("candidates", 0, "price_per_million_tokens_usd")),
    ({"candidates": [{"name": "x", "self_hosted": {"price_per_hour_usd": 1}}]}, ("candidates", 0, "tokens_per_s")),
    ({"candidates": [A, {**A}]}, ("candidates", 1, "name")),
    ({"candidates": [{**A, "prefix_hit_rate": [0.1, 0.2]}, {**B, "prefix_hit_rate": [0.1, 0.2, 0.3]}]},
     ("candidates", 1, "prefix_hit_rate")),
    ({"candidates": [{**A, "usage": {"prefix_tokens": 10, "cache_write_tokens": 11}}]},
     ("candidates", 0, "usage", "cache_write_tokens")),
    ({"candidates": [A], "requirement": {"deadline_s": 6}}, ("requirement", "min_fraction_passed_on_time")),
    ({"candidates": [{k: v for k, v in A.items() if k != "latency_s"}],
      "requirement": {"deadline_s": 6, "min_fraction_passed_on_time": 0.9}}, ("candidates", 0, "latency_s")),
    ({"candidates": [A], "requirement": {"min_tokens_per_s": 10}}, ("candidates", 0, "tokens_per_s")),
])
def test_semantic_errors_name_the_field(body, loc):
    with pytest.raises(CalcInputError) as e:
        calc(body)
    assert e.value.loc == loc


@pytest.mark.parametrize("patch", [{"pass_rate": 1.5}, {"prefix_hit_rate": -0.1}, {"prefix_hit_rate": float("nan")},
                                   {"unknown": 1}, {"prefix_hit_rate": []}])
def test_bad_values_are_refused_by_the_model(patch):
    with pytest.raises(ValidationError):
        calc(with_b(**patch))


@pytest.mark.parametrize("body", [{"tasks": 0, "candidates": [A]}, {"candidates": []}, {"candidates": [A] * 21}])
def test_bad_requests_are_refused_by_the_model(body):
    with pytest.raises(ValidationError):
        calc(body)


# --------------------------------------------------------------------------- cascade: cheap first, escalate on failure

C = {"name": "C", "price_per_million_tokens_usd": {"input": 0.5, "output": 1},
     "usage": {"new_input_tokens": 1000, "output_tokens": 1000}, "pass_rate": 0.5}


def test_cascade_of_two_stages_by_hand():
    o = calc({**BOOK, "cascade": [{"candidate": "A", "verify_cost": 0.001}, {"candidate": "B", "verify_cost": 0.001}]})
    c = o["cascade"]
    # A per call 0.0109 (all hits); B per call 0.5 × 0.0082 + 0.5 × 0.0424 = 0.0253
    cost = 1.0 * (0.0109 + 0.001) + (1 - 0.8) * (0.0253 + 0.001)
    success = 1 - (1 - 0.8) * (1 - 0.98)
    assert [s["reach_probability"] for s in c["stages"]] == pytest.approx([1.0, 0.2])
    assert c["cost_per_task"] == pytest.approx(cost) == pytest.approx(0.01716)
    assert c["success_rate"] == pytest.approx(success) == pytest.approx(0.996)
    assert c["cost_per_success"] == pytest.approx(cost / success)
    assert c["cost_total"] == pytest.approx(1000 * cost)
    assert c["mean_latency_s"] == pytest.approx(10 + 0.2 * (0.5 * 4 + 0.5 * 12))
    assert c["worst_latency_s"] == pytest.approx(10 + 12)
    assert c["best_single"] == "A"
    assert c["saving_vs_best_single"] == pytest.approx(0.0109 / 0.8 - cost / success)


def test_cascade_of_three_stages_by_hand():
    o = calc({"tasks": 10, "candidates": [A, B, C],
              "cascade": [{"candidate": "C"}, {"candidate": "A"}, {"candidate": "B"}]})
    c = o["cascade"]
    call_c = (1000 * 0.5 + 1000 * 1) / 1e6                      # 0.0015
    cost = call_c + 0.5 * 0.0109 + 0.5 * 0.2 * 0.0253           # Σ P(reach i) × cost_i
    success = 1 - 0.5 * 0.2 * 0.02
    assert [s["reach_probability"] for s in c["stages"]] == pytest.approx([1.0, 0.5, 0.1])
    assert [s["expected_cost"] for s in c["stages"]] == pytest.approx([0.0015, 0.00545, 0.00253])
    assert c["cost_per_task"] == pytest.approx(cost) == pytest.approx(0.00948)
    assert c["success_rate"] == pytest.approx(0.998)
    assert c["cost_per_success"] == pytest.approx(cost / success)
    assert c["mean_latency_s"] is None            # C has no latency
    # retrying the cheap C until it passes (0.0015 / 0.5 = 0.003 per success) beats escalating to A and B here
    assert o["cheapest_feasible"] == "C" and c["best_single"] == "C"
    assert c["saving_vs_best_single"] == pytest.approx(0.003 - cost / success)
    assert c["saving_vs_best_single"] < 0


def test_cascade_of_one_stage_is_the_candidate_once():
    o = calc({**BOOK, "cascade": [{"candidate": "B"}]})
    b = o["candidates"][1]
    assert o["cascade"]["cost_per_success"] == pytest.approx(b["cost_per_success"])


def test_cascade_feasibility_and_refusals():
    o = calc({**BOOK, "requirement": {"min_pass_rate": 0.99}, "cascade": [{"candidate": "A"}, {"candidate": "B"}]})
    assert o["cascade"]["feasible"] is True and o["cheapest_feasible"] is None
    o = calc({**BOOK, "requirement": DEADLINE, "cascade": [{"candidate": "A"}, {"candidate": "B"}]})
    assert o["cascade"]["feasible"] is None
    with pytest.raises(CalcInputError) as e:
        calc({**BOOK, "cascade": [{"candidate": "A"}, {"candidate": "Z"}]})
    assert e.value.loc == ("cascade", 1, "candidate")
    with pytest.raises(ValidationError):
        calc({**BOOK, "cascade": []})


def test_cascade_follows_a_hit_rate_sweep():
    o = calc({**with_b(prefix_hit_rate=[0.0, 0.5, 1.0]), "cascade": [{"candidate": "A"}, {"candidate": "B"}]})
    for i, h in enumerate([0.0, 0.5, 1.0]):
        one = calc({**with_b(prefix_hit_rate=h), "cascade": [{"candidate": "A"}, {"candidate": "B"}]})
        assert o["cascade"]["cost_per_success"][i] == pytest.approx(one["cascade"]["cost_per_success"])


def test_assumption_says_dividing_by_the_pass_rate_means_retrying_until_success():
    _, _, res = run("routing-cost", BOOK, no_lookup)
    text = " ".join(res.assumptions)
    assert "retried on the same candidate until it passes" in text and "geometric" in text
    assert "not retried" not in text
    _, _, res = run("routing-cost", {**BOOK, "cascade": [{"candidate": "A"}, {"candidate": "B"}]}, no_lookup)
    assert any("independent" in a and "Cascade" in a for a in res.assumptions)


def test_headline_names_the_cheapest_and_its_cost():
    from calculators.framework.headline import fmt_usd
    _, _, res = run("routing-cost", {**BOOK, "cascade": [{"candidate": "A"}, {"candidate": "B"}]}, no_lookup)
    o = res.outputs
    assert res.headline.startswith("A is the cheapest")
    assert fmt_usd(o["candidates"][0]["cost_per_success"]) in res.headline
    assert fmt_usd(o["cascade"]["cost_per_success"]) in res.headline and "99.6%" in res.headline
    _, _, res = run("routing-cost", {**BOOK, "requirement": DEADLINE}, no_lookup)
    assert res.headline.startswith("No candidate meets") and res.headline.endswith(".")


def test_outputs_model_validates_every_example():
    from calculators.framework.registry import REGISTRY
    c = REGISTRY["routing-cost"]
    for body in (c.example, *c.extra_examples, {**with_b(prefix_hit_rate=[0.0, 1.0]), "requirement": DEADLINE}):
        _, _, res = run("routing-cost", body, no_lookup)
        c.outputs_model.model_validate(res.outputs)
        assert len(res.headline) > 20 and res.headline.endswith(".")
