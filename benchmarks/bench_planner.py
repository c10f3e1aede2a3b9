"""Speed of the deployment planner in-process: one plan over ≥ 10,000 configurations, for a dense and a MoE model,
beside the standard request (the calculator's example) and a loop of single-configuration calls.

A configuration is one candidate the planner ranks and answers: hardware × split (tensor-parallel degree,
expert-parallel degree, attention data parallelism) × pipeline stages × batch × mode (aggregated, or disaggregated
pools) — one row of `candidates`, counted by `configurations_evaluated`. Weight and KV formats are one per request;
the MoE searches are also timed with skewed routing and MTP drafting on, and with an FP8 KV cache.

    .venv/bin/python benchmarks/bench_planner.py            # add --profile for the top functions of one plan

Times are wall-clock (best and median of repeated runs, after one cold run that indexes the measured tables) and
CPU time of this process; on a shared machine the best run is the one to compare with the < 100 ms target. A plan
keeps the step-model operation lists of its last few searches (they depend on the model, splits, batches, context
and formats, not on the hardware or the traffic), so each search is also timed with them rebuilt every run.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculators.families.serving import _plan_search  # noqa: E402
from calculators.framework.registry import REGISTRY  # noqa: E402
from calculators.framework.runner import compute  # noqa: E402
from knowledge.loader import catalog_lookup, default_catalog  # noqa: E402

TRAFFIC = {"arrival_rate_per_s": 10, "input_tokens": 2000, "output_tokens": 500, "ttft_s": 2.0, "tpot_s": 0.05}
HARDWARE = ["h100-sxm", "h200-sxm", "b200-sxm", "a100-80gb-sxm", "mi300x"]
#: dense: 5 hardware × TP 1/2/4/8 × 250 batches × 2 modes = 10,000
DENSE = {**TRAFFIC, "model": "llama-3.1-70b", "hardware": HARDWARE, "tp": [1, 2, 4, 8], "batch": list(range(1, 251)),
         "mode": "both"}
#: MoE: 5 hardware × 13 splits (TP 1/2/4/8 × EP 1/2/4/8 where EP divides TP, and DP attention at TP 2/4/8 with
#: EP = TP) × 77 batches × 2 modes = 10,010
MOE = {**TRAFFIC, "model": "deepseek-r1", "hardware": HARDWARE, "tp": [1, 2, 4, 8], "batch": list(range(1, 78)),
       "mode": "both", "tpot_s": 0.1}
SEARCHES = {
    "dense (llama-3.1-70b)": DENSE,
    "MoE (deepseek-r1, DP attention auto)": MOE,
    "MoE, skewed routing (Zipf 1.0) + MTP on": {**MOE, "expert_skew": 1.0, "mtp": True},
    "MoE, FP8 KV cache": {**MOE, "kv_format": "fp8"},
}


def timed(fn, repeat: int) -> tuple[list[float], list[float]]:
    wall, cpu = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def bench(label: str, body: dict, lookup, repeat: int) -> float:
    t0 = time.perf_counter()
    out = compute("deployment-plan", body, lookup)[2].outputs
    cold = time.perf_counter() - t0
    n = out["configurations_evaluated"]
    wall, cpu = timed(lambda: compute("deployment-plan", body, lookup), repeat)

    def fresh():                # the same plan with its step-model operation lists built again
        _plan_search._TABLES.clear()
        compute("deployment-plan", body, lookup)

    wall_f, cpu_f = timed(fresh, repeat)
    print(f"{label}: {n:,} configurations — best {min(wall) * 1e3:.1f} ms, median {statistics.median(wall) * 1e3:.1f} ms "
          f"wall, best {min(cpu) * 1e3:.1f} ms CPU; op lists rebuilt: best {min(wall_f) * 1e3:.1f} ms wall, "
          f"{min(cpu_f) * 1e3:.1f} ms CPU (first call {cold * 1e3:.0f} ms)")
    print(f"  {out['headline']}")
    return min(wall)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--profile", action="store_true", help="cProfile one dense and one MoE plan")
    args = ap.parse_args()
    lookup = catalog_lookup(default_catalog())
    example = REGISTRY["deployment-plan"].example
    bench("standard request (the calculator's example)", example, lookup, args.repeat)
    best = {label: bench(label, body, lookup, args.repeat) for label, body in SEARCHES.items()}
    if args.profile:
        import cProfile
        import pstats
        for body in (DENSE, MOE):
            prof = cProfile.Profile()
            prof.enable()
            compute("deployment-plan", body, lookup)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    rng = random.Random(0)
    sample = [{**TRAFFIC, "model": DENSE["model"], "hardware": [rng.choice(HARDWARE)], "tp": [rng.choice([1, 2, 4, 8])],
               "batch": [rng.randint(1, 250)], "mode": rng.choice(["aggregated", "disaggregated"])} for _ in range(50)]
    t0 = time.perf_counter()
    for body in sample:
        compute("deployment-plan", body, lookup)
    per_call = (time.perf_counter() - t0) / len(sample)
    dense_best = best["dense (llama-3.1-70b)"]
    print(f"loop of single-configuration calls: {per_call * 1e3:.2f} ms per call → {per_call * 1e4:.1f} s for 10,000 "
          f"(×{per_call * 1e4 / dense_best:.0f} the dense plan)")


if __name__ == "__main__":
    main()
