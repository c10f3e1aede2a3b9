"""Speed of the measured step engine: one estimate, and a 10,000-configuration sweep (batch × context × tp) of
Qwen3-8B decode on h100_sxm, plus the cold cost of indexing the tables and the leave-one-out errors.

    .venv/bin/python benchmarks/bench_measured.py

Tables come from the committed subset of AIConfigurator's measurements (`lookup("measurement", "h100_sxm/<table>")`).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculators.domain.architecture import arch_from_record
from calculators.perf.measured import leave_one_out
from calculators.perf.measured_step import decode_step
from calculators.perf.measured_tables import (
    MeasuredSystem,
    clear_index,
    load_system,
)
from calculators.domain.hardware import hardware_spec
from knowledge.loader import catalog_lookup, default_catalog

def _system(lookup) -> MeasuredSystem:
    """h100_sxm's committed measured tables (knowledge/data/measured), as the calculators receive them."""
    return load_system(lookup, "h100_sxm", hardware_spec(lookup, "h100-sxm"))


def _best(fn, repeat: int = 7) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> None:
    lookup = catalog_lookup(default_catalog())
    system = _system(lookup)
    arch = arch_from_record(lookup("model", "qwen3-8b"), None)
    b, c, t = np.meshgrid([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], np.linspace(128, 32768, 250).round(), [1, 2, 4, 8],
                          indexing="ij")
    b, c, t = b.ravel(), c.ravel(), t.ravel()

    clear_index()
    t0 = time.perf_counter()
    decode_step(arch, system, 1, 1024, 2)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    decode_step(arch, system, b, c, t)
    first_sweep = time.perf_counter() - t0
    one = _best(lambda: decode_step(arch, system, 1, 1024, 1), 50)
    sweep = _best(lambda: decode_step(arch, system, b, c, t), 9)
    est = decode_step(arch, system, 1, 1024, 1)
    print(f"index the tables (first estimate, cold)   {cold * 1e3:8.1f} ms")
    print(f"one measured estimate                     {one[0] * 1e3:8.2f} ms (median {one[1] * 1e3:.2f})")
    print(f"10,000-configuration sweep, first call    {first_sweep * 1e3:8.1f} ms (finds nearest measured cells once)")
    print(f"10,000-configuration sweep                {sweep[0] * 1e3:8.1f} ms (median {sweep[1] * 1e3:.1f})")
    print(f"Qwen3-8B decode b=1 ctx=1024 tp=1: {float(est.total_s) * 1e3:.3f} ms, "
          f"{float(est.ratio_to_bound):.2f}× the per-op bound, {est.framework} {est.version}")
    for table in ("gemm_perf", "generation_attention_perf", "moe_perf", "context_attention_perf"):
        out = leave_one_out(system.tables[table], sample=1000, seed=0)
        print(f"leave-one-out {table:27s} {out['points']} points, {out['errors'].size} estimates: "
              f"median {out['median'] * 100:.1f} %, p90 {out['p90'] * 100:.1f} %")


if __name__ == "__main__":
    main()
