"""Engines pad a batch to a size they have a kernel (or a captured CUDA graph) for, so a step of m rows never costs
more than the same step measured at a larger m. The GEMM tables hold slower kernel choices at single sizes (on B200
the FP8 GEMM of DeepSeek-R1's shared expert takes 26 µs at m = 1 and 10 µs at m = 2); read as measured, they put a
batch-1 decode step about 2.5 ms above a batch-2 one, and serving-estimate's TPOT at one user 50 % above the runs
published for it. The lookups answer the least latency measured at m or above (`Grid.padded`).
"""
from __future__ import annotations

import numpy as np
import pytest

from calculators.perf.measured_tables import build_grid, locate


def _grid():
    m = np.array([1, 2, 4, 8, 16, 1, 2, 4, 8, 16], dtype=float)
    n = np.array([512] * 5 + [1024] * 5, dtype=float)
    lat_ms = np.array([0.026, 0.010, 0.011, 0.027, 0.012,     # spikes at m = 1 and m = 8
                       0.020, 0.021, 0.022, 0.030, 0.040])    # already monotone
    return build_grid(("m", "n"), [m, n], lat_ms)


def test_a_padded_cell_keeps_the_least_latency_at_its_m_or_above():
    g = _grid().padded("m")
    q = [np.array([1.0, 2.0, 4.0, 8.0, 16.0]), np.full(5, 512.0)]
    assert locate(g, q).latency_s == pytest.approx([0.010e-3, 0.010e-3, 0.011e-3, 0.012e-3, 0.012e-3])


def test_padding_leaves_a_monotone_row_as_measured_and_never_raises_a_cell():
    raw, g = _grid(), _grid().padded("m")
    q = [np.array([1.0, 2.0, 4.0, 8.0, 16.0]), np.full(5, 1024.0)]
    assert locate(g, q).latency_s == pytest.approx(locate(raw, q).latency_s)
    assert np.all(np.nan_to_num(g.log_lat, nan=0) <= np.nan_to_num(raw.log_lat, nan=0) + 1e-12)


def test_an_unmeasured_cell_stays_unmeasured():
    m = np.array([1, 4, 8], dtype=float)
    n = np.array([512, 512, 1024], dtype=float)
    g = build_grid(("m", "n"), [m, n], np.array([0.05, 0.01, 0.02])).padded("m")
    assert np.isnan(g.log_lat).sum() == build_grid(("m", "n"), [m, n], np.array([0.05, 0.01, 0.02])).log_lat.size - 3
    assert g.points == 3


def test_the_gemm_lookup_is_non_decreasing_in_m_on_the_b200_tables(lookup):
    from calculators.domain import hardware_spec
    from calculators.perf import gemm_kernel, load_system, measured_system_of

    hw = hardware_spec(lookup, "b200-sxm")
    system = load_system(lookup, measured_system_of(lookup, "b200-sxm"), hw, framework="sglang")
    m = np.arange(1.0, 65.0)
    for n, k in ((512, 7168), (4096, 7168), (7168, 256)):
        lat, _ = gemm_kernel(system, m, np.full_like(m, n), np.full_like(m, k), "fp8")
        assert np.all(np.diff(lat) >= -1e-15), (n, k)
        assert lat[0] < 0.02e-3      # the 26 µs measured at m = 1 is not what a padded engine runs


def test_the_moe_lookup_is_non_decreasing_in_tokens(lookup):
    from calculators.domain import hardware_spec
    from calculators.perf import load_system, measured_system_of, moe_kernel

    hw = hardware_spec(lookup, "b200-sxm")
    system = load_system(lookup, measured_system_of(lookup, "b200-sxm"), hw, framework="sglang")
    tokens = np.array([1.0, 2, 4, 8, 16, 32, 64, 128, 256])
    lat, _ = moe_kernel(system, tokens, 7168, 2048, 8, 256, 1, 8, "nvfp4", None)
    assert np.all(np.diff(lat) >= -1e-15)
