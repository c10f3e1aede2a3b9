"""break-even and mixture-choice: the book's payback, codec and crossover examples, invariants, validation."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

MIB = 2**20


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


def test_tuning_search_pays_after_67_executions():
    o = calc("break-even", {"one_off": 0.012, "saving_per_use": 0.00018, "uses": [50, 100]})
    assert o["break_even_uses"][0] == pytest.approx(66.6667, abs=1e-4)
    assert o["first_beneficial_use"] == [67, 67]
    assert o["net_benefit"] == pytest.approx([-0.003, 0.006])
    assert o["worthwhile"] == [False, True]


def test_reconfiguration_steps_break_even_exactly_400():
    o = calc("break-even", {"one_off": 80, "cost_per_use_before": 1.2, "cost_per_use_after": 1.0, "uses": 1000})
    assert o["break_even_uses"] == pytest.approx(400)
    assert o["first_beneficial_use"] == 401          # strictly more than 400 steps must remain
    assert o["total_before"] == pytest.approx(1200) and o["total_after"] == pytest.approx(1080)


def test_reconfiguration_calls_256_and_decode_261580():
    o = calc("break-even", {"one_off": 0.1, "cost_per_use_before": [6.5720256e-4, 7.057344e-5],
                            "cost_per_use_after": [2.6573418666666667e-4, 7.019114666666667e-5]})
    assert o["first_beneficial_use"] == [256, 261580]


def test_offline_and_online_codec_break_even_bandwidth():
    o = calc("break-even", {"amount_per_use_before": 96 * MIB, "amount_per_use_after": 24 * MIB,
                            "cost_per_use_after": 96 * MIB / 1e9, "rate": [0.125e9, 25e9]})
    assert o["break_even_rate"] == pytest.approx([0.75e9, 0.75e9])
    assert [round(v * 1e3, 3) for v in o["cost_per_use_before"]] == [805.306, 4.027]
    assert [round(v * 1e3, 3) for v in o["cost_per_use_after"]] == [301.990, 101.670]
    assert o["first_beneficial_use"] == [1, None]     # pays below 0.75 GB/s, never above
    online = calc("break-even", {"amount_per_use_before": 16 * MIB, "amount_per_use_after": 4 * MIB,
                                 "cost_per_use_after": 2 * 16 * MIB / 1e9})
    assert online["break_even_rate"] == pytest.approx(0.375e9)
    assert "break_even_uses" not in online            # no rate given: only the break-even rate


def test_payback_time_and_one_off_spread_over_uses():
    o = calc("break-even", {"one_off": 10, "saving_per_use": 0.5, "uses_per_s": 4})
    assert o["payback_s"] == pytest.approx(5)
    r = calc("break-even", {"one_off": 1, "amount_per_use_before": 100, "amount_per_use_after": 0, "uses": 10})
    assert r["break_even_rate"] == pytest.approx(1000)  # 100 / (1/10)


@settings(max_examples=100, deadline=None)
@given(one_off=st.floats(0, 1e6), saving=st.floats(1e-6, 1e3))
def test_first_beneficial_use_is_the_first_with_positive_net(one_off, saving):
    o = calc("break-even", {"one_off": one_off, "saving_per_use": saving})
    n = o["first_beneficial_use"]
    assert n >= 1
    assert n * saving > one_off * (1 - 1e-9)
    assert (n - 1) * saving <= one_off * (1 + 1e-9)


@settings(max_examples=60, deadline=None)
@given(ab=st.floats(1, 1e9), frac=st.floats(0, 0.99), extra=st.floats(1e-6, 10))
def test_at_the_break_even_rate_the_saving_vanishes(ab, frac, extra):
    body = {"amount_per_use_before": ab, "amount_per_use_after": ab * frac, "cost_per_use_after": extra}
    rate = calc("break-even", body)["break_even_rate"]
    s = calc("break-even", {**body, "rate": [rate * 0.5, rate, rate * 2]})["saving_per_use"]
    assert s[0] > 0 and s[2] < 0
    assert abs(s[1]) <= 1e-9 * max(extra, ab / rate)


def test_negative_saving_never_pays():
    o = calc("break-even", {"one_off": 1, "saving_per_use": -0.1, "uses": 10})
    assert o["break_even_uses"] is None and o["first_beneficial_use"] is None
    assert o["net_benefit"] == pytest.approx(-2)


@pytest.mark.parametrize("body, loc", [
    ({"one_off": 1}, ("saving_per_use",)),
    ({"saving_per_use": 1, "cost_per_use_before": 2}, ("saving_per_use",)),
    ({"saving_per_use": 1, "rate": 2}, ("rate",)),
    ({"saving_per_use": [1, 2], "uses": [1, 2, 3]}, ("uses",)),
])
def test_break_even_semantic_errors(body, loc):
    with pytest.raises(CalcInputError) as e:
        calc("break-even", body)
    assert e.value.loc == loc


@pytest.mark.parametrize("body", [{"one_off": -1, "saving_per_use": 1}, {"saving_per_use": float("inf")},
                                  {"saving_per_use": 1e31}, {"saving_per_use": 1, "rate": 0,
                                                             "amount_per_use_before": 1}, {"saving_per_use": []}])
def test_break_even_bad_values(body):
    with pytest.raises(ValidationError):
        calc("break-even", body)


# --------------------------------------------------------------------------- mixture-choice

STALE = [{"name": "A", "if_event": 0.09, "if_not": 0.26}, {"name": "B", "if_event": 0.2, "if_not": 0.2}]


def test_stale_cache_break_even_and_hidden_p99():
    o = calc("mixture-choice", {"options": STALE, "probability": 0.9, "quantile": 0.99, "threshold": 0.22})
    assert o["crossings"][0]["probability"] == pytest.approx(6 / 17)
    assert o["crossings"][0]["better_above"] == "A"
    a, b = o["options"]
    assert a["expected"] == pytest.approx(0.107) and a["quantile"] == 0.26 and b["quantile"] == 0.2
    assert a["expected_within_threshold"] is True and a["quantile_within_threshold"] is False
    assert b["quantile_within_threshold"] is True
    assert o["best"] == "A"


def test_context_mix_crossover_27_over_35():
    o = calc("mixture-choice", {"options": [{"name": "A", "if_event": 120, "if_not": 180},
                                            {"name": "B", "if_event": 144, "if_not": 99}], "probability": [0.5, 0.9]})
    assert o["crossings"][0]["probability"] == pytest.approx(27 / 35)
    assert o["best"] == ["B", "A"]


@settings(max_examples=80, deadline=None)
@given(vals=st.lists(st.floats(0, 1e3), min_size=4, max_size=4), ps=st.lists(st.floats(0, 1), min_size=1, max_size=6))
def test_expectations_cross_where_reported_and_best_is_lowest(vals, ps):
    opts = [{"name": "x", "if_event": vals[0], "if_not": vals[1]}, {"name": "y", "if_event": vals[2], "if_not": vals[3]}]
    o = calc("mixture-choice", {"options": opts, "probability": ps})
    p = o["crossings"][0]["probability"]
    if p is not None:
        at = calc("mixture-choice", {"options": opts, "probability": p})["options"]
        assert at[0]["expected"] == pytest.approx(at[1]["expected"], rel=1e-9, abs=1e-9)
    for i in range(len(ps)):
        ex = [opt["expected"][i] for opt in o["options"]]
        assert o["best"][i] == ["x", "y"][ex.index(min(ex))]
        assert all(math.isfinite(v) for v in ex)


def test_mixture_validation():
    with pytest.raises(CalcInputError) as e:
        calc("mixture-choice", {"options": [STALE[0], STALE[0]]})
    assert e.value.loc == ("options", 1, "name")
    for bad in ({"options": STALE[:1]}, {"options": STALE, "probability": 1.5}, {"options": STALE, "quantile": 1}):
        with pytest.raises(ValidationError):
            calc("mixture-choice", bad)


# --------------------------------------------------------------------------- schema-fuzzing regressions

def test_first_beneficial_use_beyond_64_bits_is_a_float():
    # The fuzzed request: 1e30 / 0.00018 uses; int() of it is not a 64-bit integer and the API answered 500.
    import orjson
    _, _, r = run("break-even", {"one_off": 1e30, "saving_per_use": 0.00018, "uses": [50, 100]}, no_lookup)
    o = orjson.loads(orjson.dumps(r.outputs, option=orjson.OPT_SERIALIZE_NUMPY))
    assert o["first_beneficial_use"] == [pytest.approx(1e30 / 0.00018)] * 2
    assert calc("break-even", {"one_off": 0.012, "saving_per_use": 0.00018})["first_beneficial_use"] == 67
