"""CPU time of the deployment planner on its examples, and how much of it the serving-estimate pass takes (issue #25
item 6: each shortlisted candidate re-estimated by `serving-estimate`).

    .venv/bin/python benchmarks/bench_plan_estimate.py [--repeat 5]

Prints, per example: CPU seconds of one plan (best and median of the repeats, after one cold run that indexes the
measured tables), the configurations screened, the candidates re-estimated, and CPU ms per re-estimated candidate.
Figures only: nothing is asserted (times depend on the machine and its load).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from calculators.framework.registry import REGISTRY  # noqa: E402
from calculators.framework.runner import compute  # noqa: E402
from knowledge.loader import catalog_lookup, default_catalog  # noqa: E402

#: the planner's example, the same on the default hardware list (MI300X included) and a MoE model
EXAMPLES = {
    "example": dict(REGISTRY["deployment-plan"].example),
    "default hardware": {k: v for k, v in REGISTRY["deployment-plan"].example.items() if k != "hardware"},
    "moe (qwen3-30b-a3b)": {**REGISTRY["deployment-plan"].example, "model": "qwen3-30b-a3b"},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    lookup = catalog_lookup(default_catalog())
    for name, body in EXAMPLES.items():
        compute("deployment-plan", body, lookup)                  # cold: measured tables, step tables
        times = []
        out = None
        for _ in range(args.repeat):
            t0 = time.process_time()
            out = compute("deployment-plan", body, lookup)[2].outputs
            times.append(time.process_time() - t0)
        cands = out["candidates"]
        n_est = sum(1 for c in cands if c.get("figures") == "serving-estimate")
        best = out["best"]
        line = (f"{name:22s} CPU best {min(times) * 1e3:7.1f} ms, median {statistics.median(times) * 1e3:7.1f} ms; "
                f"{out['configurations_evaluated']} configurations, {n_est} re-estimated")
        if n_est:
            line += f" (at most {min(times) * 1e3 / n_est:.2f} ms each)"
        if best:
            line += (f"; best {best['hardware']} {best['mode']} TP {best['tp']} batch {best['batch']} × "
                     f"{best['replicas']}: TTFT p90 {best['ttft_s']:.3f} s, TPOT {best['tpot_s'] * 1e3:.2f} ms, "
                     f"${best['cost_per_mtok_usd']:.3f}/Mtok ({best.get('figures', 'screen')})")
        print(line)


if __name__ == "__main__":
    main()
