"""quantization: block-format sizes from the book (KV formats, MXFP4/NVFP4, GGUF, casts) and invariants."""
from __future__ import annotations

import importlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from calculators.framework import MIB, CalcInputError, UnknownId, no_lookup
from calculators.framework.registry import REGISTRY
from tests.calculators.plain import compute as run  # outputs as plain values (sweeps are arrays in a Result)

# Taken after the registry has imported every family (a family imported first would miss registration).
FORMATS = importlib.import_module("calculators.families.memory.quantization").FORMATS

KV_VALUES = 603_979_776          # one 8K-token Qwen3-8B request
GATE = 50_331_648                # one [12288, 4096] matrix


def calc(body, lookup=no_lookup):
    return run("quantization", body, lookup)[2].outputs


def test_kv_format_capacity_table():
    o = calc({"values": KV_VALUES, "format": "bf16", "compare": ["bf16", "fp8", "q8_0", "q4_0", "fp4_block16"]})
    assert [r["total_bytes"] / MIB for r in o["formats"]] == [1152, 576, 612, 324, 324]
    assert [r["effective_bits_per_value"] for r in o["formats"]] == [16, 8, 8.5, 4.5, 4.5]


def test_ggml_block_sizes_match_their_structs():
    # bytes per block from ggml's static_asserts: q4_0 18, q4_1 20, q5_0 22, q5_1 24, q8_0 34 (per 32);
    # q2_K 84, q3_K 110, q4_K 144, q5_K 176, q6_K 210 (per 256)
    for name, block, nbytes in (("q4_0", 32, 18), ("q4_1", 32, 20), ("q5_0", 32, 22), ("q5_1", 32, 24), ("q8_0", 32, 34),
                                ("q2_k", 256, 84), ("q3_k", 256, 110), ("q4_k", 256, 144), ("q5_k", 256, 176), ("q6_k", 256, 210)):
        assert calc({"values": block, "format": name})["total_bytes"] == nbytes, name


def test_low_bit_weight_formats_mxfp4_m2xfp_nvfp4():
    o = calc({"shape": [12288, 4096], "format": "mxfp4",
              "compare": ["bf16", "mxfp4", {"name": "m2xfp", "bits_per_value": 4, "group_size": 32, "scale_bytes_per_group": 2}, "nvfp4"]})
    bf16, mx, m2, nv = (r["total_bytes"] for r in o["formats"])
    assert bf16 == 96 * MIB and mx == 25.5 * MIB and m2 == 27 * MIB
    assert nv == 27 * MIB + 4          # + one FP32 global scale
    assert m2 / mx - 1 == pytest.approx(0.0588, abs=1e-4)


def test_oaken_outliers_4_8_bits():
    o = calc({"values": KV_VALUES, "format": {"bits_per_value": 4, "outlier_fraction": 0.1, "bits_per_outlier": 8}})
    assert o["effective_bits_per_value"] == pytest.approx(4.8)
    assert o["total_bytes"] / MIB == pytest.approx(345.6)


def test_static_per_head_fp8_scale_is_one_group_per_layer_head():
    # 2 (K,V) x 36 layers x 8 heads static FP32 scales = a group of 8192 x 128 values each
    o = calc({"values": KV_VALUES, "format": {"bits_per_value": 8, "group_size": 8192 * 128, "scale_bytes_per_group": 4}})
    assert o["scale_bytes"] == 2304


def test_fp8_group_scales_per_row():
    o = calc({"shape": [1024, 12288], "format": {"bits_per_value": 8, "group_size": 128, "scale_bytes_per_group": 4}})
    assert o["payload_bytes"] == 12 * MIB and o["scale_bytes"] == 0.375 * MIB


def test_rows_not_a_multiple_of_the_group_pay_a_whole_scale():
    a = calc({"shape": [10, 33], "format": "q4_0"})
    assert a["scale_bytes"] == 10 * 2 * 2      # ceil(33/32) = 2 blocks per row
    b = calc({"values": 330, "format": "q4_0"})
    assert b["scale_bytes"] == math.ceil(330 / 32) * 2


def test_gguf_nominal_vs_measured():
    o = calc({"values": 235_000_000_000, "format": {"bits_per_value": 2}, "measured_bytes": 88_014_818_560})
    assert o["total_bytes"] == 58.75e9
    assert o["measured_bits_per_value"] == pytest.approx(2.996, abs=1e-3)


def test_cast_time_cpu_vs_gpu():
    o = calc({"values": GATE, "format": "fp32", "reference_format": "bf16", "convert_bytes_per_s": [100e9, 1500e9]})
    assert o["convert_s"] == pytest.approx([3.020e-3, 0.2013e-3], rel=1e-3)


def test_tensors_sum_operator_boundary_traffic():
    o = calc({"tensors": [
        {"name": "gate_up", "values": 1024 * 24576},
        {"name": "intermediate", "values": 1024 * 12288, "count": 2},
        {"name": "fp8_out", "values": 1024 * 12288, "row_length": 12288,
         "format": {"bits_per_value": 8, "group_size": 128, "scale_bytes_per_group": 4}}]})
    assert o["total_bytes"] == 108.375 * MIB
    assert [t["bytes"] / MIB for t in o["tensors"]] == [48, 48, 12.375]


def test_model_params_in_a_format(lookup):
    res = run("quantization", {"model": "llama-3.1-70b", "format": "bf16", "compare": ["fp8", "int4"]}, lookup)[2]
    assert res.outputs["total_bytes"] == 140e9
    assert [r["total_bytes"] for r in res.outputs["formats"]] == [70e9, 35e9]
    assert res.sources and res.sources[0]["field"] == "params_total"


@settings(max_examples=80, deadline=None)
@given(n=st.integers(0, 10**12), name=st.sampled_from(sorted(FORMATS)))
def test_bytes_at_least_payload_and_effective_bits_bound(n, name):
    o = calc({"values": n, "format": name})
    f = FORMATS[name]
    assert o["total_bytes"] >= n * f.bits / 8 - 1e-6
    if n and n % f.group == 0:
        assert o["total_bytes"] == pytest.approx(n * f.effective_bits / 8 + f.tensor_bytes)


@settings(max_examples=40, deadline=None)
@given(a=st.integers(0, 10**9), b=st.integers(0, 10**9))
def test_monotone_in_values(a, b):
    lo, hi = sorted((a, b))
    assert calc({"values": lo, "format": "q4_0"})["total_bytes"] <= calc({"values": hi, "format": "q4_0"})["total_bytes"]


def test_sweep_matches_scalar_calls():
    vals = [0, 1, 31, 32, 10**6]
    o = calc({"values": vals, "format": "nvfp4"})
    assert o["total_bytes"] == [calc({"values": v, "format": "nvfp4"})["total_bytes"] for v in vals]


def test_zero_values_are_valid():
    o = calc({"values": 0, "format": "nvfp4"})
    assert o["total_bytes"] == 0 and o["compression_vs_reference"] is None


@pytest.mark.parametrize("body", [
    {"values": -1},
    {"values": 1, "format": "fp5"},
    {"values": 1, "format": {"bits_per_value": 0}},
    {"values": 1, "format": {"bits_per_value": 4, "group_size": -1}},
    {"values": 1, "format": {"bits_per_value": 4, "outlier_fraction": 1.5}},
    {"values": 1, "extra": 2},
    {"shape": []},
])
def test_bad_input_is_refused(body):
    with pytest.raises(ValidationError):
        REGISTRY["quantization"].request_model.model_validate(body)


def test_exactly_one_size_source():
    with pytest.raises(CalcInputError):
        calc({"values": 1, "shape": [2, 2]})
    with pytest.raises(CalcInputError):
        calc({"format": "bf16"})
    with pytest.raises(UnknownId):
        calc({"model": "nope"})
