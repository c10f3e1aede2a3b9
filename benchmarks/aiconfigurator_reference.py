"""Reference decode latencies from NVIDIA AIConfigurator 0.12.0, for comparison with this service's estimates.

    python3 benchmarks/aiconfigurator_reference.py

Runs AIConfigurator's static-batching estimator (``aiconfigurator.cli.api.cli_estimate(mode="static")``,
which wraps ``InferenceSession.run_static``; SILICON database mode, vLLM 0.24.0 tables) for a fixed list of
deployments and writes ``benchmarks/results/aiconfigurator_reference.json``: a list of objects {name, model,
system, framework, version, tp, ep, pp, batch, isl, osl, weight_dtype, kv_dtype, tpot_ms, ttft_ms,
breakdown_ms, call, error, ...}.

What the numbers are: a static batch of ``batch`` requests, prefill of ``isl`` tokens each (ttft_ms), then
``osl - 1`` decode steps at KV lengths isl+1 .. isl+osl-1, sampled every 32 steps and integrated. ``tpot_ms``
is the mean decode step; ``breakdown_ms`` is that mean split per op (the op totals / (osl - 1)), with
``breakdown_group_ms`` summing it into gemm / attention / moe / moe_dispatch / allreduce / other and
``breakdown_source`` telling, per op, whether the value came from measured tables ("silicon") or the
package's fallback formula ("empirical"). ``decode_step_ms_at_isl`` is one decode step at KV length ``isl``
(``mode="static_gen"``, osl=2), as a check on the averaging.

AIConfigurator is never imported by the service: this script installs it into its own virtual environment
(``$AIC_VENV``, default ``.cache/aic-venv`` in the repo, made with ``python3 -m venv`` and
``pip install aiconfigurator==0.12.0`` when missing) and re-runs itself with that interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "aiconfigurator_reference.json"
VENV = Path(os.environ.get("AIC_VENV", ROOT / ".cache" / "aic-venv")).resolve()
PACKAGE = "aiconfigurator==0.12.0"
FRAMEWORK, VERSION, DB_MODE = "vllm", "0.24.0", "SILICON"
ISL, OSL = 2048, 128
BF16 = {"gemm_quant_mode": "bfloat16", "kvcache_quant_mode": "bfloat16"}
BF16_MOE = {**BF16, "moe_quant_mode": "bfloat16"}

# (name, HF model id, system, parallelism kwargs, batch sizes, quantization kwargs; {} = checkpoint default)
DEPLOYMENTS = [
    ("llama3.1-70b h100 tp4", "meta-llama/Meta-Llama-3.1-70B", "h100_sxm", {"tp_size": 4}, [8], BF16),
    ("qwen3-235b-a22b h200 tp8 ep8", "Qwen/Qwen3-235B-A22B", "h200_sxm",
     {"tp_size": 8, "moe_tp_size": 1, "moe_ep_size": 8}, [8, 32, 64], BF16_MOE),
    ("gpt-oss-120b h100 tp2", "openai/gpt-oss-120b", "h100_sxm", {"tp_size": 2, "moe_tp_size": 2}, [4], {}),
    ("deepseek-r1 h200 tp8", "deepseek-ai/DeepSeek-R1", "h200_sxm", {"tp_size": 8, "moe_tp_size": 8}, [32], {}),
    ("deepseek-r1 h200 tp8 ep8", "deepseek-ai/DeepSeek-R1", "h200_sxm",
     {"tp_size": 8, "moe_tp_size": 1, "moe_ep_size": 8}, [32], {}),
    ("llama3.1-8b h100 tp1", "meta-llama/Meta-Llama-3.1-8B", "h100_sxm", {"tp_size": 1}, [1, 8, 64], BF16),
]

# Op-name fragment -> group, first match wins (matched on AIConfigurator's full name, e.g. "generation_ar_1").
GROUPS = [("dispatch", "moe_dispatch"), ("moe", "moe"), ("_ar", "allreduce"), ("allreduce", "allreduce"),
          ("p2p", "allreduce"), ("gemm", "gemm"), ("attention", "attention"), ("mla", "attention")]


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", PACKAGE], check=True)
    return python


def group_of(op: str) -> str:
    return next((group for fragment, group in GROUPS if fragment in op), "other")


def estimate(cli_estimate, name, model, system, parallel, batch, quant) -> dict:
    kwargs = {"mode": "static", "backend_name": FRAMEWORK, "backend_version": VERSION, "database_mode": DB_MODE,
              "isl": ISL, "osl": OSL, "batch_size": batch, "pp_size": 1, **parallel, **quant}
    call = f"cli_estimate({model!r}, {system!r}, " + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"
    row = {"name": f"{name} b{batch}", "model": model, "system": system, "framework": FRAMEWORK,
           "version": VERSION, "tp": parallel["tp_size"], "ep": parallel.get("moe_ep_size", 1), "pp": 1,
           "batch": batch, "isl": ISL, "osl": OSL, "weight_dtype": quant.get("gemm_quant_mode"),
           "kv_dtype": quant.get("kvcache_quant_mode"), "tpot_ms": None, "ttft_ms": None, "breakdown_ms": None,
           "call": call, "error": None}
    try:
        result = cli_estimate(model, system, **kwargs)
        one_step = cli_estimate(model, system, **{**kwargs, "mode": "static_gen", "osl": 2})
    except Exception as exc:  # noqa: BLE001 -- recorded, not raised: one failing deployment must not stop the rest
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    raw, summary = result.raw, result.summary
    steps = OSL - 1
    per_op, groups = {}, {}
    for op, ms in summary.get_generation_latency_dict().items():
        per_op[op.removeprefix("generation_")] = ms / steps
        groups[group_of(op)] = groups.get(group_of(op), 0.0) + ms / steps
    row.update({
        "version": raw["version"], "system": raw["system"], "framework": raw["backend"],
        "ep": raw["moe_ep"] or 1, "moe_tp": raw["moe_tp"], "parallel": raw["parallel"],
        "weight_dtype": raw["gemm"], "kv_dtype": raw["kvcache"], "fmha_dtype": raw["fmha"],
        "moe_dtype": raw["moe"], "comm_dtype": raw["comm"],
        "tpot_ms": result.tpot, "ttft_ms": result.ttft, "decode_step_ms_at_isl": one_step.tpot,
        "breakdown_ms": per_op, "breakdown_group_ms": groups,
        "breakdown_source": {op.removeprefix("generation_"): src
                             for op, src in summary.get_generation_source_dict().items()},
        "memory_gb_per_gpu": raw["memory"], "warning": result.kv_cache_warning,
    })
    return row


def run_inside_venv() -> list[dict]:
    import logging
    from importlib.metadata import version

    logging.disable(logging.WARNING)  # the package logs every fallback table it loads
    from aiconfigurator.cli.api import cli_estimate

    package = {"aiconfigurator": version("aiconfigurator"), "aiconfigurator-core": version("aiconfigurator-core")}
    rows = []
    for name, model, system, parallel, batches, quant in DEPLOYMENTS:
        for batch in batches:
            row = estimate(cli_estimate, name, model, system, parallel, batch, quant)
            row["package"] = package
            row["database_mode"] = DB_MODE
            rows.append(row)
    return rows


def main() -> None:
    if Path(sys.prefix).resolve() != VENV:
        python = ensure_venv()
        sys.exit(subprocess.run([str(python), __file__, *sys.argv[1:]], check=False).returncode)
    rows = run_inside_venv()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rows, indent=1) + "\n")
    for row in rows:
        if row["error"]:
            print(f"{row['name']:34s} ERROR {row['error']}")
            continue
        groups = ", ".join(f"{g} {ms:.2f}" for g, ms in sorted(row["breakdown_group_ms"].items(), key=lambda x: -x[1]))
        print(f"{row['name']:34s} {row['weight_dtype']}/{row['kv_dtype']} tpot {row['tpot_ms']:7.3f} ms "
              f"(1 step @isl {row['decode_step_ms_at_isl']:.3f})  ttft {row['ttft_ms']:8.1f} ms  [{groups}]")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
