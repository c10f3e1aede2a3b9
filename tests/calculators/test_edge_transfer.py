"""edge-transfer: the book's RAW retouching and Computer Use budgets, plus invariants."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from calculators.framework.runner import compute as run

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


# --------------------------------------------------------------------------- RAW capture and device vs cloud

LINK = {"download_bytes": 5e6, "uplink_bits_per_s": 20e6, "downlink_bits_per_s": 100e6, "rtt_s": 0.1, "processing_s": 0.3}


def test_raw_capture_bytes_are_geometry_over_compression():
    raw = {"width_px": 8192, "height_px": 5464, "bits_per_pixel": 14, "frames": 3, "compression_ratio": 1.5}
    o = calc({**LINK, "raw": raw})
    size = 8192 * 5464 * 14 * 3 / 8 / 1.5
    assert o["raw_bytes"] == pytest.approx(size) and o["upload_bytes"] == pytest.approx(size)
    assert o["upload_s"] == pytest.approx(size * 8 / 20e6)
    # the same as giving those bytes directly
    assert o["total_s"] == pytest.approx(calc({**LINK, "upload_bytes": size})["total_s"])
    # transfer compression still applies on top of the file's own
    o2 = calc({**LINK, "raw": raw, "compression": {"ratio": 2, "codec_s": 0.1}})
    assert o2["upload_s"] == pytest.approx(size / 2 * 8 / 20e6)


def test_raw_and_upload_bytes_are_refused_together_and_one_is_needed():
    raw = {"width_px": 100, "height_px": 100, "bits_per_pixel": 12}
    with pytest.raises(CalcInputError) as e:
        calc({**LINK, "raw": raw, "upload_bytes": 1e6})
    assert e.value.loc == ("raw",)
    with pytest.raises(CalcInputError) as e:
        calc(LINK)
    assert e.value.loc == ("upload_bytes",)
    with pytest.raises(ValidationError):
        calc({**LINK, "raw": {**raw, "bits_per_pixel": 0}})


def test_raw_base_keeps_its_bytes_in_what_ifs():
    raw = {"width_px": 6000, "height_px": 4000, "bits_per_pixel": 14}
    o = calc({**LINK, "raw": raw, "what_if": [{"uplink_bits_per_s": 100e6}]})
    size = 6000 * 4000 * 14 / 8
    assert o["what_if"][0]["breakdown"]["upload"] == pytest.approx(size * 8 / 100e6)


def test_device_versus_cloud_with_a_measured_local_time():
    o = calc({**RAW, "on_device": {"processing_s": 4.0, "overhead_s": 0.5}})
    assert o["cloud_total_s"] == pytest.approx(12.8) == pytest.approx(o["total_s"])
    assert o["local_total_s"] == pytest.approx(4.5)
    assert o["faster"] == "device" and o["saved_s"] == pytest.approx(8.3)
    o = calc({**RAW, "uplink_bits_per_s": 1e9, "on_device": {"processing_s": 4.0}})   # 0.24 s upload: the cloud wins
    assert o["faster"] == "cloud" and o["saved_s"] == pytest.approx(4.0 - (0.24 + 0.1 + 0.3 + 0.4))


def test_device_versus_cloud_from_work_and_rate_over_rounds_and_sweeps():
    o = calc({**RAW, "rounds": 3, "on_device": {"work_flops": 2e13, "peak_flop_per_s": 5e12, "compute_efficiency": 0.5}})
    assert o["local_per_round_s"] == pytest.approx(2e13 / (5e12 * 0.5)) and o["local_total_s"] == pytest.approx(24.0)
    assert o["cloud_total_s"] == pytest.approx(3 * 12.8) and o["faster"] == "device"
    o = calc({**RAW, "uplink_bits_per_s": [5e6, 1e9], "on_device": {"processing_s": 4.0}})
    assert o["faster"] == ["device", "cloud"] and len(o["saved_s"]) == 2


def test_device_rate_from_a_hardware_peak(lookup):
    peak = next(p["flop_per_s"]["value"] for p in lookup("hardware", "rtx4090")["peaks"]
                if p["input_precision"] == "FP16" and p["accumulator"] == "FP32" and p["sparsity"] == "dense")
    _, _, res = run("edge-transfer", {**RAW, "on_device": {"work_flops": 1e15, "hardware": "rtx4090", "compute_efficiency": 0.5}}, lookup)
    assert res.outputs["local_total_s"] == pytest.approx(1e15 / (peak * 0.5))
    assert any(s.get("record") == "rtx4090" for s in res.sources)
    _, _, res = run("edge-transfer", {**RAW, "on_device": {"work_flops": 1e15, "hardware": "rtx4090"}}, lookup)
    assert any("lower bound" in a for a in res.assumptions)


def test_on_device_refusals(lookup):
    for bad, loc in (({}, ("on_device", "processing_s")),
                     ({"processing_s": 1, "work_flops": 1e12}, ("on_device", "processing_s")),
                     ({"work_flops": 1e12}, ("on_device", "peak_flop_per_s")),
                     ({"processing_s": 1, "hardware": "rtx4090"}, ("on_device", "hardware"))):
        with pytest.raises(CalcInputError) as e:
            calc({**RAW, "on_device": bad})
        assert e.value.loc == loc
    with pytest.raises(CalcInputError) as e:      # an Apple GPU record has no stored peak
        run("edge-transfer", {**RAW, "on_device": {"work_flops": 1e12, "hardware": "m2-pro-19gpu"}}, lookup)
    assert e.value.loc == ("on_device", "precision")


def test_headline_gives_total_dominant_term_and_the_winner():
    from calculators.framework.headline import fmt_bytes, fmt_seconds
    _, _, res = run("edge-transfer", RAW, no_lookup)
    assert "12.8 s" in res.headline and "the upload" in res.headline and res.headline.endswith(".")
    raw = {"width_px": 8192, "height_px": 5464, "bits_per_pixel": 14}
    _, _, res = run("edge-transfer", {**LINK, "raw": raw, "on_device": {"processing_s": 4.0}}, no_lookup)
    o = res.outputs
    for part in (fmt_bytes(o["raw_bytes"]), fmt_seconds(o["total_s"]), fmt_seconds(o["local_total_s"]),
                 fmt_seconds(o["saved_s"]), "device is faster"):
        assert part in res.headline, part
    _, _, res = run("edge-transfer", {**RAW, "uplink_bits_per_s": [5e6, 20e6]}, no_lookup)
    assert "first of 2 points" in res.headline


def test_outputs_model_validates_every_example(lookup):
    from calculators.framework.registry import REGISTRY
    c = REGISTRY["edge-transfer"]
    for body in (c.example, *c.extra_examples, {**RAW, "download_bytes": 0, "rtt_s": 0}):
        _, _, res = run("edge-transfer", body, lookup)
        c.outputs_model.model_validate(res.outputs)
        assert len(res.headline) > 20


# --------------------------------------------------------------------------- no download, images in megapixels (#28)

def test_a_request_that_downloads_nothing_needs_no_downlink():
    # queqiao's ASR request: the answer is tiny, only the upload, RTT and model time count
    up = {"upload_bytes": 355e3, "uplink_bits_per_s": 333e6, "rtt_s": 0.2, "processing_s": 0.03}
    o = calc(up)
    assert o["download_s"] == 0 and o["total_s"] == pytest.approx(355e3 * 8 / 333e6 + 0.2 + 0.03)
    assert o["total_s"] == pytest.approx(calc({**up, "downlink_bits_per_s": 1e6})["total_s"])
    assert calc({**up, "download_bytes": 0, "what_if": [{"rtt_s": 0.1}]})["what_if"][0]["saved_s"] == pytest.approx(0.1)
    # a download without a downlink rate is a 422 naming the downlink (in a what-if: that variant's)
    with pytest.raises(CalcInputError) as e:
        calc({**up, "download_bytes": [0, 5e6]})
    assert e.value.loc == ("downlink_bits_per_s",)
    with pytest.raises(CalcInputError) as e:
        calc({**up, "what_if": [{"download_bytes": 5e6}]})
    assert e.value.loc == ("what_if", 0, "downlink_bits_per_s")
    assert calc({**up, "what_if": [{"download_bytes": 5e6, "downlink_bits_per_s": 100e6}]})["what_if"][0]["saved_s"] \
        == pytest.approx(-0.4)


def test_an_image_in_megapixels():
    # raw-retouching: "30 MB (e.g. 20 MP x 12-bit Bayer)"; 12 bits per pixel is the stated default
    _, _, res = run("edge-transfer", {**LINK, "raw": {"megapixels": 20}}, no_lookup)
    assert res.outputs["raw_bytes"] == pytest.approx(20e6 * 12 / 8)
    assert res.outputs["total_s"] == pytest.approx(calc({**LINK, "upload_bytes": 20e6 * 12 / 8})["total_s"])
    assert {"pixels", "image size"} <= {s.label for s in res.steps}
    assert any(a.startswith("Bits per pixel: 12") for a in res.assumptions)
    # megapixels is width × height / 10⁶; a compressed image divides by its ratio
    shot = calc({**LINK, "raw": {"megapixels": 2.0736, "bits_per_pixel": 24, "compression_ratio": 7.776}})
    assert shot["raw_bytes"] == pytest.approx(calc({**LINK, "raw": {"width_px": 1920, "height_px": 1080, "bits_per_pixel": 24,
                                                                    "compression_ratio": 7.776}})["raw_bytes"])
    for raw, loc in (({"megapixels": 20, "width_px": 100}, ("raw", "megapixels")), ({"width_px": 100}, ("raw", "height_px")),
                     ({}, ("raw", "width_px"))):
        with pytest.raises(CalcInputError) as e:
            calc({**LINK, "raw": raw})
        assert e.value.loc == loc
