"""utilization-split, instance-fit: book examples by hand, plus invariants."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from calculators.framework import CalcInputError, no_lookup
from calculators.framework.runner import compute as run

MiB, GiB = 2**20, 2**30


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


def test_same_utilisation_two_stories():
    o = calc("utilization-split", {"window_s": 100e-6, "active_s": [40e-6, 80e-6], "useful_s": 40e-6})
    assert o["active_fraction"] == pytest.approx([0.4, 0.8])
    assert o["efficiency_while_active"] == pytest.approx([1.0, 0.5])
    assert o["utilization"] == pytest.approx([0.4, 0.4])


@given(st.floats(1e-6, 1.0), st.floats(0, 1), st.floats(0, 1))
def test_u_is_e_times_r(t, ra, rs):
    a, s = t * ra, t * ra * rs
    o = calc("utilization-split", {"window_s": t, "active_s": a, "useful_s": s})
    if a > 0:
        assert o["utilization"] == pytest.approx(o["active_fraction"] * o["efficiency_while_active"], abs=1e-12)


def test_utilisation_refusal():
    with pytest.raises(CalcInputError):
        calc("utilization-split", {"window_s": 1, "active_s": 2, "useful_s": 1})


def test_sandbox_placements():
    o = calc("instance-fit", {"placements": [{"name": "full", "local_bytes": [2 * GiB]},
                                             {"name": "touched", "local_bytes": [512 * MiB]},
                                             {"name": "shared", "local_bytes": [128 * MiB]},
                                             {"name": "shared+hot", "local_bytes": [128 * MiB, 256 * MiB]}],
                              "overhead_bytes": 4 * MiB, "instances": 100, "memory_budget_bytes": 64 * GiB})["placements"]
    assert [p["per_instance_bytes"] / MiB for p in o] == [2052, 516, 132, 388]
    assert o[0]["total_bytes"] / GiB == pytest.approx(200.390625)
    assert [p["max_instances"] for p in o] == [31, 127, 496, 168]


@given(st.integers(1, 10**4), st.integers(1, 10**6))
def test_fit_is_the_largest_that_fits(per_mib, budget_mib):
    o = calc("instance-fit", {"placements": [{"name": "x", "local_bytes": [per_mib * MiB]}], "instances": 1,
                              "memory_budget_bytes": budget_mib * MiB})["placements"][0]
    n = o["max_instances"]
    assert n * per_mib <= budget_mib < (n + 1) * per_mib


def test_instance_fit_with_a_subnormal_size_is_unbounded_not_a_crash():
    """5e-324 B per instance overflows budget / size to infinity: no whole count, answered as null, never a 500."""
    body = {"memory_budget_bytes": 1e9, "instances": 2, "placements": [{"name": "tiny", "local_bytes": [5e-324]}]}
    res = run("instance-fit", body, no_lookup)[2]
    assert res.outputs["placements"][0]["max_instances"] is None
