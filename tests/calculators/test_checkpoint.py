"""checkpoint: Adam state bytes, upload budget, Young/Daly interval."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import no_lookup
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)


def calc(body, lookup=no_lookup):
    return run("checkpoint", body, lookup)[2].outputs


def test_adam_state_of_one_matrix():
    assert calc({"params": 50_331_648})["checkpoint_bytes"] == 672 * 2**20


def test_async_upload_budget():
    o = calc({"params": 8e9, "write_bandwidth_bytes_per_s": 8e9, "interval_s": [10, 20], "blocking_s": 0.5})
    assert o["weights_bytes"] == 16e9 and o["checkpoint_bytes"] == 112e9 and o["write_s"] == 14
    assert o["generation_bytes_per_s"] == [11.2e9, 5.6e9]
    assert o["backlog_growth_bytes_per_s"] == pytest.approx([3.2e9, 0])
    assert o["keeps_up"] == [False, True]


def test_weights_only_roundtrip():
    o = calc({"params": 8_190_735_360, "master_bytes_per_param": 0, "optimizer_bytes_per_param": 0,
              "write_bandwidth_bytes_per_s": 25e9})
    assert o["save_plus_restore_s"] == pytest.approx(1.3105176576)


def test_young_and_daly():
    o = calc({"params": 8e9, "write_bandwidth_bytes_per_s": 8e9, "mtbf_s": 86400})
    assert o["young_interval_s"] == pytest.approx(math.sqrt(2 * 14 * 86400))
    assert o["daly_interval_s"] < o["young_interval_s"]
    assert o["expected_lost_work_s"] == pytest.approx(o["young_interval_s"] / 2 + 14)


def test_state_override_and_store_model(lookup):
    assert calc({"params": [1e12, 5e12], "state_bytes_per_param": 16})["checkpoint_bytes"] == [16e12, 80e12]
    o = calc({"model": "qwen3-8b"}, lookup)
    assert o["checkpoint_bytes"] == pytest.approx(o["params"] * 14)


@given(c=st.floats(1, 1e4), m=st.floats(1e3, 1e8))
def test_young_interval_minimises_first_order_waste(c, m):
    base = {"params": c * 1e9, "write_bandwidth_bytes_per_s": 1e9, "mtbf_s": m}
    tau = calc(base)["young_interval_s"]
    waste = lambda t: calc({**base, "interval_s": t})["expected_waste_fraction"]
    assert waste(tau) <= waste(tau * 1.5) + 1e-12 and waste(tau) <= waste(tau / 1.5) + 1e-12


def test_validation():
    with pytest.raises(ValidationError):
        calc({})
    with pytest.raises(ValidationError):
        calc({"params": 1e9, "write_bandwidth_bytes_per_s": 0})
    with pytest.raises(ValidationError):
        calc({"params": 1e9, "model": "qwen3-8b"})


# --------------------------------------------------------------------------- schema-fuzzing regressions

@pytest.mark.parametrize("field, value", [("weight_bytes_per_param", 65), ("master_bytes_per_param", 65),
                                          ("optimizer_bytes_per_param", 65), ("gradient_bytes_per_param", 65),
                                          ("state_bytes_per_param", 1025)])
def test_bytes_per_param_bounds_are_enforced(field, value):
    # These bounds were written as Field(le=...) next to NonNegFloat/PosFloat, which pydantic silently ignores.
    with pytest.raises(ValidationError) as e:
        calc({"params": 8e9, field: value})
    assert e.value.errors()[0]["loc"][0] == field
    with pytest.raises(ValidationError):
        calc({"model": "", "write_bandwidth_bytes_per_s": 8e9})
