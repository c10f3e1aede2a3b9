"""attention-projections, bank-conflicts: book examples by hand, plus invariants."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from calculators.framework import CalcInputError, no_lookup
from calculators.framework.runner import compute as run


def calc(name, body):
    return run(name, body, no_lookup)[2].outputs


def test_dit_projection_wider_than_hidden():
    o = calc("attention-projections", {"hidden_size": 5376, "heads": 56, "head_dim": 128})
    assert o["q_width"] == 7168
    assert o["q_over_hidden"] == pytest.approx(4 / 3)
    assert o["params"] == 4 * 5376 * 7168


def test_v4_grouped_output():
    o = calc("attention-projections", {"hidden_size": 4096, "heads": 64, "head_dim": 512, "kv_heads": 1,
                                       "output_groups": 8, "group_output_dim": 1024})
    assert (o["q_width"], o["group_in_width"], o["group_concat_width"]) == (32768, 4096, 8192)
    assert o["o_params"] == 8 * 4096 * 1024 + 8192 * 4096


def test_projection_refusals():
    with pytest.raises(CalcInputError):
        calc("attention-projections", {"hidden_size": 64, "heads": 6, "head_dim": 8, "output_groups": 4, "group_output_dim": 8})
    with pytest.raises(CalcInputError):
        calc("attention-projections", {"hidden_size": 64, "heads": 8, "head_dim": 8, "output_groups": 4})


@given(st.integers(1, 128), st.integers(1, 256))
def test_mha_equal_widths_is_four_d_squared(h, dh):
    o = calc("attention-projections", {"hidden_size": h * dh, "heads": h, "head_dim": dh})
    assert o["params"] == o["params_if_hidden_squared"]


def test_bank_conflicts_32x32_fp32():
    o = calc("bank-conflicts", {"rows": 32, "cols": 32, "bytes_per_element": 4, "pitch_elements": [32, 33]})
    p32, p33 = o["pitches"]
    assert (p32["bytes"], p32["row_rounds"], p32["column_rounds"]) == (4096, 1, 32)
    assert (p33["bytes"], p33["row_rounds"], p33["column_rounds"]) == (4224, 1, 1)
    assert p33["padding_bytes"] == 128 and p33["padding_fraction"] == pytest.approx(0.03125)


@given(st.integers(1, 64), st.integers(0, 64))
def test_rounds_bounded_by_threads(cols, pad):
    o = calc("bank-conflicts", {"rows": 32, "cols": cols, "pitch_elements": [cols + pad]})
    p = o["pitches"][0]
    assert 1 <= p["column_rounds"] <= 32 and 1 <= p["row_rounds"] <= 32


def test_pitch_below_cols_refused():
    with pytest.raises(CalcInputError):
        calc("bank-conflicts", {"rows": 4, "cols": 8, "pitch_elements": [7]})
