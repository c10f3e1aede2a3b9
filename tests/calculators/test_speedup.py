"""speedup, scaling-efficiency, amdahl: the book's rechecks by hand, plus invariants."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from calculators.framework.runner import compute as run


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


def test_reported_gain_recheck():
    o = calc("speedup", {"pairs": [{"baseline": {"rate_per_s": 51.0}, "new": {"rate_per_s": 60.4},
                                    "reported_gain": 0.204}]})["pairs"][0]
    assert o["speedup"] == pytest.approx(60.4 / 51.0)
    assert o["throughput_gain"] == pytest.approx(0.18431, abs=1e-5)
    assert o["reported_minus_recomputed"] == pytest.approx(0.204 - 9.4 / 51.0)


def test_speedup_is_not_time_saved():
    o = calc("speedup", {"pairs": [{"baseline": {"speedup": 1}, "new": {"speedup": 1.32}}]})["pairs"][0]
    assert o["time_reduction"] == pytest.approx(1 - 1 / 1.32)
    assert o["throughput_gain"] == pytest.approx(0.32)


def test_work_in_time():
    o = calc("speedup", {"pairs": [{"baseline": {"time_s": 15.19}, "new": {"time_s": 43.69, "work": 4}},
                                   {"baseline": {"speedup": 2.02}, "new": {"speedup": 2.22}}]})["pairs"]
    assert o[0]["speedup"] == pytest.approx(4 * 15.19 / 43.69)
    assert o[1]["time_reduction"] == pytest.approx(1 - 2.02 / 2.22)


@given(st.floats(0.01, 1e4), st.floats(0.01, 1e4))
def test_time_and_rate_agree(t0, t1):
    a = calc("speedup", {"pairs": [{"baseline": {"time_s": t0}, "new": {"time_s": t1}}]})["pairs"][0]
    b = calc("speedup", {"pairs": [{"baseline": {"rate_per_s": 1 / t0}, "new": {"rate_per_s": 1 / t1}}]})["pairs"][0]
    assert a["speedup"] == pytest.approx(b["speedup"])
    assert (1 - a["time_reduction"]) * a["speedup"] == pytest.approx(1.0)


def test_refusals():
    with pytest.raises(CalcInputError):
        calc("speedup", {"pairs": [{"baseline": {"time_s": 1, "rate_per_s": 1}, "new": {"time_s": 1}}]})
    with pytest.raises(CalcInputError):
        calc("speedup", {"pairs": [{"baseline": {"speedup": 1}, "new": {"time_s": 1}}]})
    with pytest.raises(ValidationError):
        calc("speedup", {"pairs": []})


def test_scaling_per_card():
    o = calc("scaling-efficiency", {"points": [{"devices": 2, "rate_per_s": 18.04},
                                               {"devices": 4, "rate_per_s": 33.82}]})["points"]
    assert [p["per_device_rate"] for p in o] == pytest.approx([9.02, 8.455])
    assert o[1]["efficiency"] == pytest.approx(8.455 / 9.02)
    assert o[1]["ideal_speedup"] == 2


@given(st.integers(1, 64), st.floats(0.1, 1e6))
def test_linear_scaling_is_efficiency_one(n, r):
    o = calc("scaling-efficiency", {"points": [{"devices": 1, "rate_per_s": r}, {"devices": n, "rate_per_s": r * n}]})
    assert o["points"][1]["efficiency"] == pytest.approx(1.0)


def test_amdahl_prefill():
    o = calc("amdahl", {"parts": [{"name": "prefill", "time_s": 0.9, "speedup": 3}, {"name": "decode", "time_s": [0.1, 2.7]}]})
    assert o["speedup"] == pytest.approx([2.5, 1.2])
    assert o["speedup_limit"] == pytest.approx([10.0, 3.6 / 2.7])


@given(st.floats(0.01, 100), st.floats(0.01, 100), st.floats(1, 100))
def test_amdahl_bounded_by_limit(a, b, s):
    o = calc("amdahl", {"parts": [{"name": "fast", "time_s": a, "speedup": s}, {"name": "slow", "time_s": b}]})
    assert 1.0 - 1e-12 <= o["speedup"] <= o["speedup_limit"] * (1 + 1e-12)
