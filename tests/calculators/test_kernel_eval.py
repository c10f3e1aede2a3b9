"""softmax-merge, tolerance-match, measurement-order, vliw-cycles: the book's checks by hand, plus invariants."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from calculators.framework import CalcInputError, no_lookup
from calculators.framework.runner import compute as run


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


def test_online_softmax_and_inverted_rescale():
    o = calc("softmax-merge", {"scores": [0, math.log(2)], "values": [1, 3], "block_sizes": [1, 1]})
    assert o["exact"] == pytest.approx(7 / 3)
    assert o["online"] == pytest.approx(7 / 3)
    assert o["inverted_rescale"] == pytest.approx(10 / 3)


def test_state_merge():
    o = calc("softmax-merge", {"scores": [0, math.log(2), math.log(4)], "values": [1, 3, -2], "block_sizes": [2, 1]})
    assert o["online"] == pytest.approx(-1 / 7)
    assert o["mean_of_block_outputs"] == pytest.approx((7 / 3 - 2) / 2)


@given(st.lists(st.tuples(st.floats(-20, 20), st.floats(-10, 10)), min_size=1, max_size=12), st.data())
def test_online_equals_exact_for_any_blocking(pairs, data):
    n = len(pairs)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, n - 1)), max_size=4)))) if n > 1 else []
    bounds = [0, *[c for c in cuts if c < n], n]
    sizes = [b - a for a, b in zip(bounds, bounds[1:]) if b > a]
    o = calc("softmax-merge", {"scores": [p[0] for p in pairs], "values": [p[1] for p in pairs], "block_sizes": sizes})
    assert o["online"] == pytest.approx(o["exact"], abs=1e-9)


def test_softmax_refusal():
    with pytest.raises(CalcInputError):
        calc("softmax-merge", {"scores": [0, 1], "values": [1, 2], "block_sizes": [1]})


def test_tolerance_ratio():
    o = calc("tolerance-match", {"elements": [{"count": 18, "reference": 0, "actual": 0},
                                              {"count": 2, "reference": 0, "actual": 2}],
                                 "atol": 1, "rtol": 0.3, "required_ratios": [0.9, 0.95]})
    assert o["matched_ratio"] == pytest.approx(0.9)
    assert o["passes"] == [True, False]


@given(st.floats(0, 10), st.floats(0, 1))
def test_looser_tolerance_never_matches_less(atol, rtol):
    body = {"elements": [{"count": 3, "reference": 5, "actual": 7}, {"count": 1, "reference": -1, "actual": 3}],
            "rtol": rtol}
    a = calc("tolerance-match", {**body, "atol": atol})["matched"]
    b = calc("tolerance-match", {**body, "atol": atol + 1})["matched"]
    assert b >= a


def test_measurement_order_drift():
    o = calc("measurement-order", {"options": [{"name": "A", "true_s": 100e-6}, {"name": "B", "true_s": 90e-6}],
                                   "drift_s": [0, 10e-6, 20e-6, 30e-6],
                                   "orders": [["A", "A", "B", "B"], ["A", "B", "B", "A"]]})
    aabb, abba = o["orders"]
    assert aabb["means_s"] == pytest.approx([105e-6, 115e-6]) and aabb["looks_fastest"] == "A"
    assert abba["means_s"] == pytest.approx([115e-6, 105e-6]) and abba["looks_fastest"] == "B"
    assert abba["margin_s"] == pytest.approx(10e-6)


@given(st.floats(0, 1e-3), st.floats(-1e-5, 1e-5))
def test_abba_cancels_linear_drift(c, slope):
    drift = [c + slope * k for k in range(4)]
    o = calc("measurement-order", {"options": [{"name": "A", "true_s": 1e-4}, {"name": "B", "true_s": 2e-4}],
                                   "drift_s": drift, "orders": [["A", "B", "B", "A"]]})
    bias = o["orders"][0]["bias_s"]
    assert bias[0] == pytest.approx(bias[1], abs=1e-15)


def test_vliw_baseline():
    o = calc("vliw-cycles", {"iterations": [256, 16], "fixed_cycles": 278,
                             "engines": [{"engine": "alu", "per_iteration": 29}, {"engine": "load", "per_iteration": 3},
                                         {"engine": "store", "per_iteration": 2}, {"engine": "flow", "per_iteration": 2}]})
    assert (o["iterations"], o["loop_cycles"], o["total_cycles"]) == (4096, 147456, 147734)


@given(st.integers(0, 100), st.integers(1, 16))
def test_packing_never_slower(k, slots):
    base = {"iterations": [10], "engines": [{"engine": "alu", "per_iteration": k, "slots": slots},
                                           {"engine": "load", "per_iteration": 1, "slots": 2}]}
    assert calc("vliw-cycles", {**base, "packing": "packed"})["loop_cycles"] <= calc("vliw-cycles", base)["loop_cycles"]
