"""Work bounded by the model (issue 27, item 1): CPU time and peak RSS of the audit's requests, each run in a fresh
process so that its peak is its own.

- kv-cache with a `model_config` of N layers (N = 10^4 .. 10^6 extrapolates the audit's 10^9, which is refused now);
- every calculator that takes a `model_config`, on its example with the largest config the bounds accept (1,000
  layers, 4,096 experts and heads, hidden 262,144, vocabulary 10^7) beside a real one (Qwen3-30B-A3B);
- a batch of speculative-decoding items with the Monte Carlo check at its per-request cap (20 M draws each).

Run: `.venv/bin/python benchmarks/bench_model_bounds.py [--quick]`; a child's memory is capped (ulimit -v) at 4 GiB so that
an unbounded request fails here instead of taking the machine. Figures vary with machine load.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "knowledge" / "data" / "model-configs"

CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from knowledge.loader import catalog_lookup, default_catalog
from api.envelope import run
from calculators.framework.runner import RunError
lookup = catalog_lookup(default_catalog())
job = json.loads(sys.stdin.read())
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.process_time()
try:
    if job["calculator"] == "batch":
        from calculators.framework import limits
        from calculators.framework.registry import REGISTRY
        calc = REGISTRY[job["item"]]
        costs = [limits.check(calc, calc.request_model.model_validate(job["body"]))] * job["items"]
        try:
            limits.check_total(costs)
        except limits.LimitExceeded as e:
            raise RunError(413, "too-large", "Request too large", e.message) from None
        guard = getattr(limits, "guard", None)      # a batch's items share one guard (absent before issue 27)
        import contextlib
        with guard() if guard else contextlib.nullcontext():
            for _ in range(job["items"]):
                run(job["item"], job["body"], lookup)
    else:
        run(job["calculator"], job["body"], lookup)
    status = 200
except RunError as e:
    status = e.status
except MemoryError:
    status = "MemoryError"
cpu = time.process_time() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"status": status, "cpu_s": cpu, "peak_rss_mb": peak / 1024, "before_mb": before / 1024}))
'''


def child(job: dict, root: Path = ROOT, timeout: float = 900) -> dict:
    cmd = ["bash", "-c", f"ulimit -v {4 * 2**20}; exec {sys.executable} -c \"$0\" {root}", CHILD]
    try:
        p = subprocess.run(cmd, input=json.dumps(job), capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "PYTHONPATH": str(root)})
    except subprocess.TimeoutExpired:
        return {"status": f"timeout {timeout:g} s"}
    if p.returncode:
        return {"status": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1][:120] if p.stderr.strip() else ''}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def llama(layers: int) -> dict:
    return {"model_type": "llama", "num_hidden_layers": layers, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16"}


def largest() -> dict:
    c = json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text())
    return c | {"num_hidden_layers": 1000, "max_window_layers": 1000, "num_experts": 4096, "num_experts_per_tok": 8,
                "num_attention_heads": 4096, "num_key_value_heads": 4096, "hidden_size": 262_144,
                "vocab_size": 10**7}


def with_config(example: dict, config: dict) -> dict:
    body = {k: v for k, v in example.items() if k not in ("model", "architecture", "params", "kv_bytes_per_token")}
    return body | {"model_config": config}


def show(label: str, r: dict) -> None:
    figs = f"{r['cpu_s']:8.3f} s CPU, peak RSS {r['peak_rss_mb']:7.0f} MB" if "cpu_s" in r else ""
    print(f"  {label:58s} {str(r['status']):>10s}  {figs}", flush=True)


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    root = Path(next((a.split("=", 1)[1] for a in argv if a.startswith("--root=")), ROOT))
    sys.path.insert(0, str(root))
    print(f"code: {root}")
    print("kv-cache with a model_config of N layers (706-byte request in the audit: N = 1e9)")
    for n in ((10**4, 10**5) if quick else (10**4, 10**5, 10**6, 10**9)):
        show(f"num_hidden_layers {n:.0e}", child({"calculator": "kv-cache", "body": {"model_config": llama(n), "tokens": 8192}}, root))
    print("examples with a real model_config (Qwen3-30B-A3B) and the largest the bounds accept")
    from calculators.framework.registry import REGISTRY
    real = json.loads((CONFIGS / "Qwen--Qwen3-30B-A3B_config.json").read_text())
    for name, calc in REGISTRY.items():
        if "hf_config" not in calc.request_model.model_fields or "model" not in calc.example:
            continue
        for label, cfg in (("qwen3-30b-a3b", real), ("largest accepted", largest())):
            show(f"{name} ({label})", child({"calculator": name, "body": with_config(calc.example, cfg)}, root))
    print("batch of speculative-decoding items at the per-request draw cap (20 M draws each)")
    body = {"acceptance_rate": [0.5] * 10, "draft_tokens": 4, "simulate": {"rounds": 500_000, "seed": 1}}
    for items in ((1, 20) if quick else (1, 20, 1000)):
        show(f"{items} item(s) x 20 M draws", child({"calculator": "batch", "item": "speculative-decoding",
                                                     "body": body, "items": items}, root))


if __name__ == "__main__":
    main(sys.argv[1:])
