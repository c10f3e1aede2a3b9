"""Speed of the deployment planner: one plan over ≥ 10,000 configurations in-process, beside the time the same
configurations take as a loop of single-configuration calls (measured on a sample, extrapolated).

    .venv/bin/python benchmarks/bench_planner.py
"""
from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculators.framework.runner import compute  # noqa: E402
from knowledge.loader import catalog_lookup, default_catalog  # noqa: E402

TRAFFIC = {"model": "llama-3.1-70b", "requests_per_s": 10, "input_tokens": 2000, "output_tokens": 500,
           "ttft_s": 2.0, "tpot_s": 0.05}
HARDWARE = ["h100-sxm", "h200-sxm", "b200-sxm", "a100-80gb-sxm", "mi300x"]
BIG = {**TRAFFIC, "hardware": HARDWARE, "tp": [1, 2, 4, 8], "batch": list(range(1, 251)), "mode": "both"}


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    lookup = catalog_lookup(default_catalog())
    t0 = time.perf_counter()
    first = compute("deployment-plan", BIG, lookup)[2]
    cold = time.perf_counter() - t0
    n = first.outputs["configurations_evaluated"]
    runs = timed(lambda: compute("deployment-plan", BIG, lookup), 7)
    print(f"plan over {n:,} configurations: best {min(runs) * 1e3:.1f} ms, median {statistics.median(runs) * 1e3:.1f} ms "
          f"(cold, with table indexing: {cold * 1e3:.0f} ms)")
    print(f"  headline: {first.outputs['headline']}")
    rng = random.Random(0)
    sample = [{**TRAFFIC, "hardware": [rng.choice(HARDWARE)], "tp": [rng.choice([1, 2, 4, 8])], "batch": [rng.randint(1, 250)],
               "mode": rng.choice(["aggregated", "disaggregated"])} for _ in range(100)]
    t0 = time.perf_counter()
    for body in sample:
        compute("deployment-plan", body, lookup)
    per_call = (time.perf_counter() - t0) / len(sample)
    print(f"loop of single-configuration calls: {per_call * 1e3:.2f} ms per call → {per_call * n:.1f} s for {n:,} "
          f"(×{per_call * n / min(runs):.0f} the vectorised plan)")


if __name__ == "__main__":
    main()
