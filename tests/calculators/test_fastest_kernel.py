"""Kernels an engine picks per shape at run time: the MoE tables keep the fastest kernel measured at each shape.

TensorRT-LLM's NVFP4 MoE on B200 is measured with two kernels (cutlass and the min-latency one); at a handful of
tokens the min-latency kernel is about 4× faster, and that is the one the engine runs. Keeping only the kernel with
the most rows (the rule for tables whose kernel is fixed by configuration) put DeepSeek-R1's decode step on B200 at
twice the published TPOT.
"""
from __future__ import annotations

import numpy as np
import pytest

from calculators.perf.measured_tables import build_grid, locate


def test_fastest_keeps_the_minimum_of_repeated_keys_and_the_default_their_geometric_mean():
    tokens = np.array([1, 1, 4, 4, 16])
    lat_ms = np.array([0.02, 0.08, 0.04, 0.16, 0.3])
    fast = build_grid(("num_tokens",), [tokens], lat_ms, fastest=True)
    mean = build_grid(("num_tokens",), [tokens], lat_ms)
    f = locate(fast, [np.array([1.0, 4.0, 16.0])]).latency_s
    m = locate(mean, [np.array([1.0, 4.0, 16.0])]).latency_s
    assert f == pytest.approx([0.02e-3, 0.04e-3, 0.3e-3])
    assert m == pytest.approx([0.04e-3, 0.08e-3, 0.3e-3])


def test_the_moe_lookup_reads_the_fastest_measured_kernel(lookup):
    import duckdb
    from pathlib import Path

    from calculators.domain import hardware_spec
    from calculators.perf import load_system, measured_system_of, moe_kernel

    hw = hardware_spec(lookup, "b200-sxm")
    system = load_system(lookup, measured_system_of(lookup, "b200-sxm"), hw, framework="trtllm")
    path = next(Path("knowledge/data/measured/b200_sxm/moe/trtllm").glob("*/moe_perf.parquet"))
    rows = duckdb.sql(f"select kernel_source, latency from '{path}' where moe_dtype = 'nvfp4' and num_experts = 256 "
                      "and topk = 8 and hidden_size = 7168 and inter_size = 2048 and moe_tp_size = 4 and "
                      "moe_ep_size = 1 and num_tokens = 1").fetchall()
    assert len({k for k, _ in rows}) > 1, "the table no longer holds two kernels at this shape"
    fastest_s = min(lat for _, lat in rows) * 1e-3
    lat, _ = moe_kernel(system, np.array([1.0]), 7168, 2048, 8, 256, 4, 1, "nvfp4", None)
    assert float(lat[0]) == pytest.approx(fastest_s, rel=1e-6)
