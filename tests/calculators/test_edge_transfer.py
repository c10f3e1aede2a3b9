"""edge-transfer: the book's RAW retouching and Computer Use budgets, plus invariants."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from calculators.core import no_lookup
from calculators.runner import compute as run

RAW = {"upload_bytes": 30e6, "download_bytes": 5e6, "uplink_bits_per_s": 20e6,
       "downlink_bits_per_s": 100e6, "rtt_s": 0.1, "processing_s": 0.3}


def calc(body):
    return run("edge-transfer", body, no_lookup)[2].outputs


def test_raw_retouching_budget():
    o = calc(RAW)
    assert o["upload_s"] == pytest.approx(12.0)
    assert o["download_s"] == pytest.approx(0.4)
    assert o["total_s"] == pytest.approx(12.8)
    assert o["dominant"] == "upload"
    assert o["bdp_bytes"] == pytest.approx(250_000)
    assert o["upload_over_bdp"] == pytest.approx(120)


def test_raw_what_ifs_report_totals_and_savings():
    o = calc({**RAW, "what_if": [{"processing_s": 0.03}, {"uplink_bits_per_s": 100e6},
                                 {"compression": {"ratio": 2, "codec_s": 0.15}}]})
    totals = [w["total_s"] for w in o["what_if"]]
    assert totals == pytest.approx([12.53, 3.2, 6.95])
    assert o["what_if"][0]["saved_s"] == pytest.approx(0.27)


def test_computer_use_rounds():
    base = {"upload_bytes": 0.8e6, "uplink_bits_per_s": 6.4e6, "downlink_bits_per_s": 1e9,
            "processing_s": 2.5, "rounds": 30,
            "what_if": [{"upload_bytes": 0.2e6, "compression": {"ratio": 1, "codec_s": 0.03}}]}
    o = calc(base)
    assert o["per_round_s"] == pytest.approx(3.5)
    assert o["total_s"] == pytest.approx(105)
    assert o["what_if"][0]["saved_s"] == pytest.approx(21.6)


def test_zero_download_and_rtt_are_valid():
    o = calc({**RAW, "download_bytes": 0, "rtt_s": 0})
    assert o["download_s"] == 0 and o["bdp_bytes"] == 0
    assert o["upload_over_bdp"] is None  # infinite ratio is reported as null, never as a bogus number


def test_sweep_broadcasts_and_matches_scalar_calls():
    rates = [5e6, 20e6, 100e6]
    o = calc({**RAW, "uplink_bits_per_s": rates})
    assert o["total_s"] == pytest.approx([calc({**RAW, "uplink_bits_per_s": r})["total_s"] for r in rates])
    assert o["dominant"] == ["upload", "upload", "upload"]


@given(up=st.floats(1, 1e9), rate=st.floats(1e3, 1e11), extra=st.floats(1.01, 10))
def test_more_uplink_never_slower(up, rate, extra):
    a = calc({**RAW, "upload_bytes": up, "uplink_bits_per_s": rate})["total_s"]
    b = calc({**RAW, "upload_bytes": up, "uplink_bits_per_s": rate * extra})["total_s"]
    assert b <= a + 1e-12 and math.isfinite(a)


# --------------------------------------------------------------------------- schema-fuzzing regressions

def test_what_if_fields_given_as_null_keep_the_base_value():
    # The fuzzed request sent every what-if field explicitly as null; `rounds: null` replaced the base rounds
    # and `total × None` raised a TypeError (a 500). Null now means "not replaced".
    nulls = {k: None for k in ("label", "upload_bytes", "download_bytes", "uplink_bits_per_s", "downlink_bits_per_s",
                               "rtt_s", "processing_s", "rounds")}
    o = calc({**RAW, "compression": {"ratio": 2, "codec_s": 0.0}, "rounds": 1,
              "what_if": [{"compression": {"ratio": 2, "codec_s": 0.0}, **nulls}, {**nulls, "rtt_s": 0.2}]})
    same, slower = o["what_if"]
    assert same["total_s"] == pytest.approx(o["total_s"]) and same["saved_s"] == pytest.approx(0.0)
    assert slower["saved_s"] == pytest.approx(-0.1)
    # `compression: null` still removes the base's compression
    o = calc({**RAW, "compression": {"ratio": 2, "codec_s": 0.0}, "what_if": [{"compression": None}]})
    assert o["what_if"][0]["breakdown"]["upload"] == pytest.approx(12.0)
