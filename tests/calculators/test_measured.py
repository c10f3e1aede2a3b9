"""Measured kernel tables: interpolation, extrapolation flags, a decode step against the kernels' own sum.

The tables come through `lookup("measurement", "<system>/<table>")` from the committed subset of AIConfigurator's
measured tables (knowledge/data/measured); a missing table fails, never skips.
"""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calculators.domain.architecture import arch_from_record
from calculators.framework import CalcInputError
from calculators.perf.measured import (
    allreduce_latency,
    context_attention_latency,
    gemm_bound_s,
    gemm_latency,
    generation_attention_latency,
    leave_one_out,
    moe_latency,
)
from calculators.perf.measured_step import decode_step, prefill_step
from calculators.perf.measured_tables import (
    TABLES,
    MeasuredSystem,
    load_system,
)
from calculators.framework.runner import compute
from calculators.domain.hardware import hardware_spec

@pytest.fixture(scope="module")
def h100(lookup) -> MeasuredSystem:
    """The committed measured tables of h100_sxm (knowledge/data/measured), as calculators receive them."""
    system = load_system(lookup, "h100_sxm", hardware_spec(lookup, "h100-sxm"))
    # vLLM's own tables: everything but the MLA core and DeepEP rows, which only SGLang / TensorRT-LLM publish
    want = set(TABLES) - {"generation_mla_perf", "context_mla_perf", "wideep_deepep_ll_perf", "wideep_deepep_normal_perf"}
    assert want <= set(system.tables), f"missing measured tables: {want - set(system.tables)}"
    return system


@pytest.fixture(scope="module")
def qwen3_8b(lookup):
    return arch_from_record(lookup("model", "qwen3-8b"), None)


def _cols(system: MeasuredSystem, table: str) -> dict:
    return system.tables[table]["columns"]


def _row(system: MeasuredSystem, table: str, **where) -> float:
    """Latency (s) of the one table row matching `where` (the test's own direct lookup)."""
    cols = _cols(system, table)
    sel = np.ones(len(cols["latency"]), dtype=bool)
    for k, v in where.items():
        sel &= np.asarray(cols[k]) == v
    assert sel.sum() == 1, (where, int(sel.sum()))
    return float(np.asarray(cols["latency"])[sel][0]) * 1e-3


def _gemm_row(system, m, n, k):
    """The bf16 GEMM a padding engine runs at this measured shape (`_gemm_padded`); the raw row is `_gemm_raw`."""
    return _gemm_padded(system, m, n, k)


def _gemm_raw(system, m, n, k):
    return _row(system, "gemm_perf", gemm_dtype="bfloat16", m=m, n=n, k=k)


def _gemm_padded(system, m, n, k, dtype="bfloat16"):
    """What a padding engine runs for an m-row GEMM: the least latency measured at m or any larger m (the test's own
    scan of the table rows, not the grid's)."""
    cols = _cols(system, "gemm_perf")
    sel = ((np.asarray(cols["gemm_dtype"]) == dtype) & (np.asarray(cols["n"]) == n) & (np.asarray(cols["k"]) == k)
           & (np.asarray(cols["m"]) >= m))
    assert sel.any(), (m, n, k)
    return float(np.asarray(cols["latency"])[sel].min()) * 1e-3


# --------------------------------------------------------------------------- grid points

def test_gemm_grid_points_are_the_measured_values_padded_to_larger_m(h100):
    cols = _cols(h100, "gemm_perf")
    rows = np.flatnonzero(np.asarray(cols["gemm_dtype"]) == "bfloat16")[::997]
    lat, flags = gemm_latency(h100, cols["m"][rows], cols["n"][rows], cols["k"][rows], "bf16")
    want = [_gemm_padded(h100, cols["m"][r], cols["n"][r], cols["k"][r]) for r in rows]
    assert lat == pytest.approx(want, rel=1e-9)
    assert np.all(lat <= cols["latency"][rows] * 1e-3 * (1 + 1e-12))
    assert set(flags) == {"measured"}


def test_attention_moe_allreduce_grid_points(h100):
    lat, flags = generation_attention_latency(h100, 4, 1 + 4095, 32, 8, 128, "bf16")
    assert float(lat) == pytest.approx(_row(h100, "generation_attention_perf", batch_size=4, step=4095, num_heads=32,
                                            num_key_value_heads=8, head_dim=128, kv_cache_dtype="bfloat16",
                                            window_size=0), rel=1e-9)
    assert flags.tolist() == "measured"
    lat, flags = context_attention_latency(h100, 2, 2048, 32, 8, 128, "bf16")
    assert float(lat) == pytest.approx(_row(h100, "context_attention_perf", batch_size=2, isl=2048, num_heads=32,
                                            num_key_value_heads=8, head_dim=128, kv_cache_dtype="bfloat16",
                                            window_size=0), rel=1e-9)
    lat, flags = moe_latency(h100, 64, 2048, 768, 8, 128, 1, 1, "bf16")
    assert float(lat) == pytest.approx(_row(h100, "moe_perf", moe_dtype="bfloat16", distribution="balanced",
                                            num_tokens=64, hidden_size=2048, inter_size=768, topk=8, num_experts=128,
                                            moe_tp_size=1, moe_ep_size=1), rel=1e-9)
    assert flags.tolist() == "measured"


def test_allreduce_message_size_counts_elements(h100):
    """The table's message_size is elements: 4096 BF16 values are 8,192 bytes."""
    lat, flags = allreduce_latency(h100, 4096 * 2, 2, "bf16")
    assert float(lat) == pytest.approx(_row(h100, "custom_allreduce_perf", num_gpus=2, message_size=4096,
                                            backend="vllm_graph"), rel=1e-9)
    assert flags.tolist() == "measured"


# --------------------------------------------------------------------------- between and beyond

@pytest.mark.parametrize("m,k", [(1, 4096), (8, 4096), (256, 5120), (4096, 8192)])
def test_gemm_between_neighbours_along_n(h100, m, k):
    lo, hi = _gemm_row(h100, m, 16384, k), _gemm_row(h100, m, 51200, k)
    ns = np.array([20000, 24576, 32768, 40000])
    lat, flags = gemm_latency(h100, m, ns, k)
    assert set(flags) == {"interpolated"}
    assert np.all(lat >= min(lo, hi)) and np.all(lat <= max(lo, hi))
    assert np.all(np.diff(lat) * np.sign(hi - lo) >= 0)       # monotone between monotone neighbours


def test_attention_between_neighbours_along_context(h100):
    lo = _row(h100, "generation_attention_perf", batch_size=8, step=1023, num_heads=32, num_key_value_heads=8,
              head_dim=128, kv_cache_dtype="bfloat16", window_size=0)
    hi = _row(h100, "generation_attention_perf", batch_size=8, step=2047, num_heads=32, num_key_value_heads=8,
              head_dim=128, kv_cache_dtype="bfloat16", window_size=0)
    lat, flags = generation_attention_latency(h100, 8, np.array([1100, 1500, 2000]), 32, 8, 128)
    assert set(flags) == {"interpolated"}
    assert np.all((lat >= lo) & (lat <= hi)) and np.all(np.diff(lat) >= 0)


def test_extrapolation_is_flagged_and_keeps_the_nearest_efficiency(h100):
    m, n, k = np.array([65536, 1]), np.array([4096, 151936]), np.array([4096, 4096])
    lat, flags = gemm_latency(h100, m, n, k)
    assert flags.tolist() == ["extrapolated", "extrapolated"]
    near = np.array([_gemm_row(h100, 32768, 4096, 4096), _gemm_row(h100, 1, 65536, 4096)])
    eff_near = gemm_bound_s([32768, 1], [4096, 65536], [4096, 4096], "bfloat16", h100.rates) / near
    eff = gemm_bound_s(m, n, k, "bfloat16", h100.rates) / lat
    assert eff == pytest.approx(eff_near, rel=1e-9)
    assert np.all(lat > near)


def test_unmeasured_cells_are_extrapolated(h100):
    """Long contexts were measured only for small batches: batch 64 × 65,536 keys is not bracketed by data."""
    lat, flags = generation_attention_latency(h100, 64, 65536, 32, 8, 128)
    assert flags.tolist() == "extrapolated"
    one = _row(h100, "generation_attention_perf", batch_size=8, step=65535, num_heads=32, num_key_value_heads=8,
               head_dim=128, kv_cache_dtype="bfloat16", window_size=0)
    assert float(lat) > 4 * one                 # 8× the sequences of a measured row: well above it


def test_unmeasured_moe_shape_takes_the_nearest_configuration(h100):
    lat, flags = moe_latency(h100, [1, 64], 2048, 700, 8, 128)
    assert set(flags) == {"extrapolated"}
    measured, _ = moe_latency(h100, [1, 64], 2048, 768, 8, 128)
    assert np.all(lat <= measured * 1.01)       # 700-wide experts are no slower than measured 768-wide ones


# --------------------------------------------------------------------------- the step

def test_decode_step_equals_the_measured_kernels_sum(h100, qwen3_8b):
    """Acceptance: Qwen3-8B decode, batch 1, context 1,024, TP 1, BF16 on H100 SXM is within 15 % of the sum of the
    measured kernels of that step, read row by row from the tables here."""
    a = qwen3_8b
    assert (a.layers, a.d, a.heads, a.kv_heads, a.head_dim, a.ffn, a.vocab) == (36, 4096, 32, 8, 128, 12288, 151936)
    qkv = _gemm_row(h100, 1, (32 + 2 * 8) * 128, 4096)                       # fused QKV: n = 6,144
    attn = _row(h100, "generation_attention_perf", batch_size=1, isl=1, step=1023, num_heads=32,
                num_key_value_heads=8, head_dim=128, kv_cache_dtype="bfloat16", window_size=0)
    o_proj = _gemm_row(h100, 1, 4096, 32 * 128)
    gate_up = 2 * _gemm_row(h100, 1, 12288, 4096)                            # gate and up as two measured GEMMs
    down = _gemm_row(h100, 1, 4096, 12288)
    head = sum(_gemm_row(h100, 1, n, 4096) for n in (65536, 51200, 16384, 16384, 2048, 256, 128))   # 151,936 columns
    kernels = 36 * (qkv + attn + o_proj + gate_up + down) + head
    est = decode_step(a, h100, batch=1, context_tokens=1024, tp=1, weight_dtype="bf16", kv_dtype="bf16")
    assert float(est.total_s) == pytest.approx(kernels, rel=0.15)
    # the parts that are grid points are the rows themselves
    assert float(est.parts_s["qkv_proj"]) == pytest.approx(36 * qkv, rel=1e-9)
    assert float(est.parts_s["o_proj"]) == pytest.approx(36 * o_proj, rel=1e-9)
    assert float(est.parts_s["ffn_down"]) == pytest.approx(36 * down, rel=1e-9)
    assert float(est.parts_s["attention"]) == pytest.approx(36 * attn, rel=0.01)      # 1,025 keys vs the 1,024 row
    assert float(est.parts_s["ffn_gate_up"]) == pytest.approx(36 * gate_up, rel=0.15)
    assert "allreduce" not in est.parts_s
    assert float(est.total_s) == pytest.approx(sum(float(v) for v in est.parts_s.values()), rel=1e-12)
    assert est.flags["lm_head"].tolist() == "extrapolated" and est.flags["qkv_proj"].tolist() == "measured"
    assert float(est.extrapolated_fraction) == pytest.approx(1 / 6)
    assert (est.framework.lower(), est.version) == ("vllm", "0.24.0")


def test_decode_is_slower_than_the_peak_rate_bound(h100, qwen3_8b, lookup):
    est = decode_step(qwen3_8b, h100, batch=[1, 8], context_tokens=1024)
    _, _, roof = compute("roofline", {"model": "qwen3-8b", "phase": "decode", "batch": [1, 8], "context_tokens": 1024,
                                      "hardware": "h100-sxm"}, lookup)
    ratio = est.total_s / np.asarray(roof.outputs["time_s"])
    assert np.all(ratio > 1.0) and np.all(ratio < 3.0)
    assert np.all(est.ratio_to_bound > 1.0)


def test_tensor_parallel_splits_the_gemms_and_adds_two_allreduces(h100, qwen3_8b):
    est = decode_step(qwen3_8b, h100, batch=4, context_tokens=2048, tp=[1, 2])
    qkv, _ = gemm_latency(h100, 4, (16 + 2 * 4) * 128, 4096)
    assert est.parts_s["qkv_proj"][1] == pytest.approx(36 * float(qkv), rel=1e-9)
    ar, _ = allreduce_latency(h100, 4 * 4096 * 2, 2)
    assert est.parts_s["allreduce"].tolist() == pytest.approx([0.0, 72 * float(ar)], rel=1e-9)
    assert est.flags["allreduce"].tolist() == ["none", "measured"]
    assert est.total_s[1] < est.total_s[0]


def test_sweep_agrees_with_single_points(h100, qwen3_8b):
    b, c, t = np.meshgrid([1, 4, 16, 64, 256], np.linspace(128, 32768, 500).round(), [1, 2, 4, 8], indexing="ij")
    b, c, t = b.ravel(), c.ravel(), t.ravel()
    assert b.size == 10_000
    est = decode_step(qwen3_8b, h100, b, c, t)
    assert est.total_s.shape == (10_000,) and np.all(np.isfinite(est.total_s)) and np.all(est.total_s > 0)
    for i in (0, 1234, 9999):
        one = decode_step(qwen3_8b, h100, int(b[i]), int(c[i]), int(t[i]))
        assert float(one.total_s) == pytest.approx(est.total_s[i], rel=1e-9)
    assert np.all((est.extrapolated_fraction >= 0) & (est.extrapolated_fraction <= 1))


def test_prefill_step(h100, qwen3_8b):
    est = prefill_step(qwen3_8b, h100, batch=1, tokens=[1024, 4096])
    attn = _row(h100, "context_attention_perf", batch_size=1, isl=1024, num_heads=32, num_key_value_heads=8,
                head_dim=128, kv_cache_dtype="bfloat16", window_size=0)
    assert est.parts_s["attention"][0] == pytest.approx(36 * attn, rel=1e-9)
    assert est.parts_s["qkv_proj"][0] == pytest.approx(36 * _gemm_row(h100, 1024, 6144, 4096), rel=1e-9)
    assert est.total_s[1] > 3 * est.total_s[0]
    with_prefix = prefill_step(qwen3_8b, h100, batch=1, tokens=1024, context_tokens=1024)
    assert float(with_prefix.parts_s["attention"]) > est.parts_s["attention"][0]
    assert with_prefix.flags["attention"].tolist() == "extrapolated"


def test_moe_model_uses_the_moe_table(h100, lookup):
    arch = arch_from_record(lookup("model", "qwen3-30b-a3b"), None)
    est = decode_step(arch, h100, batch=16, context_tokens=1024, tp=[1, 2])
    want, _ = moe_latency(h100, 16, arch.d, arch.expert_ffn, arch.top_k, arch.experts, [1, 2])
    assert est.parts_s["moe_experts"] == pytest.approx(arch.moe_layers * want, rel=1e-9)
    assert "ffn_gate_up" not in est.parts_s and "router" in est.parts_s


def test_mla_core_comes_from_its_table_and_falls_back_where_there_is_none(h100, lookup):
    arch = arch_from_record(lookup("model", "deepseek-v3"), None)
    est = decode_step(arch, h100, batch=8, context_tokens=4096, tp=8, weight_dtype="fp8")
    # vLLM's MLA module table (minus the block's projections) gives the core on H100
    assert est.flags["mla_attention"].tolist() in ("measured", "interpolated")
    assert "mla_attention" not in est.fallback_s and "mla_generation_module_perf" in est.tables
    # vLLM measured no MLA on A100: its bound ÷ the step's GEMM efficiency, flagged, counted and explained
    a100 = load_system(lookup, "a100_sxm", hardware_spec(lookup, "a100-80gb-sxm"))
    est = decode_step(arch, a100, batch=8, context_tokens=4096, tp=8, weight_dtype="fp8")
    assert est.flags["mla_attention"].tolist() == "extrapolated"
    assert "attention" not in est.parts_s and "mla_attention" in est.fallback_s
    assert "a100_sxm" in est.fallback_why["mla_attention"] and "vllm" in est.fallback_why["mla_attention"]
    assert 0 < float(est.fallback_fraction) < 1


def test_refusals(h100, qwen3_8b):
    with pytest.raises(CalcInputError):
        gemm_latency(h100, 1, 4096, 4096, "q4_k")
    with pytest.raises(CalcInputError):
        decode_step(qwen3_8b, h100, batch=1, context_tokens=10, tp=3)


# --------------------------------------------------------------------------- leave-one-out

@pytest.mark.parametrize("table", ["gemm_perf", "generation_attention_perf", "moe_perf"])
def test_leave_one_out(h100, table):
    out = leave_one_out(h100.tables[table], sample=500, seed=0)
    assert out["points"] == 500 and out["errors"].size >= 400
    assert out["median"] < 0.10 and out["p90"] < 0.35
    again = leave_one_out(h100.tables[table], sample=500, seed=0)
    assert np.array_equal(out["errors"], again["errors"])


# --------------------------------------------------------------------------- properties

@pytest.fixture(scope="module")
def bf16_gemm_rows(h100):
    cols = _cols(h100, "gemm_perf")
    sel = np.asarray(cols["gemm_dtype"]) == "bfloat16"
    raw = {(int(m), int(n), int(k)): float(v) * 1e-3
           for m, n, k, v in zip(cols["m"][sel], cols["n"][sel], cols["k"][sel], cols["latency"][sel])}
    # each cell as a padding engine runs it: the least latency at its m or any larger measured m (same n, k)
    rows = {}
    for (m, n, k) in sorted(raw, key=lambda c: -c[0]):
        best = min(raw[(m, n, k)], rows.get(("best", n, k), float("inf")))
        rows[("best", n, k)] = best
        rows[(m, n, k)] = best
    rows = {c: v for c, v in rows.items() if c[0] != "best"}
    axes = [np.unique(np.asarray(cols[a])[sel]) for a in ("m", "n", "k")]
    return rows, axes


@settings(max_examples=200)
@given(m=st.integers(1, 32768), n=st.integers(32, 65536), k=st.integers(32, 65536))
def test_gemm_inside_a_measured_cell_lies_between_its_corners(h100, bf16_gemm_rows, m, n, k):
    rows, axes = bf16_gemm_rows
    brackets = []
    for ax, x in zip(axes, (m, n, k)):
        i = min(int(np.searchsorted(ax, x, side="right")) - 1, ax.size - 2)
        brackets.append({int(ax[i]), int(ax[i + 1])} if ax[i] != x else {int(x)})
    corners = [rows.get((a, b, c)) for a in brackets[0] for b in brackets[1] for c in brackets[2]]
    lat, flags = gemm_latency(h100, m, n, k)
    if all(v is not None for v in corners):
        assert min(corners) * (1 - 1e-9) <= float(lat) <= max(corners) * (1 + 1e-9)
        assert flags.tolist() in ("measured", "interpolated")
    else:
        assert flags.tolist() == "extrapolated"


def test_a_cell_with_a_missing_corner_is_extrapolated_above_the_bound(h100):
    """Batch 64 was measured up to 8,192 keys only: 12,000 keys has one bracketing row, not two."""
    lat, flags = generation_attention_latency(h100, 64, 12000, 32, 8, 128)
    assert flags.tolist() == "extrapolated"
    kv_bytes = 64 * 12000 * 2 * 8 * 128 * 2
    assert float(lat) > kv_bytes / h100.rates.memory_bandwidth_bytes_per_s
