"""NVIDIA AIConfigurator 0.12.0 on the stored published benchmarks, beside this service's `serving-estimate`.

    python3 benchmarks/aiconfigurator_validation.py            # all three phases
    python3 benchmarks/aiconfigurator_validation.py --limit 5  # the first five supported points (a smoke run)

Issue #25 asks for the validation table "beside the same figures for AIConfigurator 0.12.0 on the points it
supports". The script runs in three phases:

1. **points** (the project's venv): the validation report (`knowledge.validation.report`, the cached one beside the
   store) gives every compared point's request and our predicted and measured figures;
2. **estimate** (AIConfigurator's own venv, ``$AIC_VENV``, default ``.cache/aic-venv``, made with
   ``pip install aiconfigurator==0.12.0`` when missing; the service never imports it): each point that AIConfigurator
   can describe is estimated with ``cli_estimate(mode="agg")`` — its in-flight-batching estimate at a concurrency
   (``batch_size``) — on the point's system, framework, parallelism, lengths and precisions;
3. **compare** (the project's venv): errors predicted / measured − 1 for both, on the same points, by source and by
   hardware, written to ``benchmarks/results/aiconfigurator_validation.json`` and printed.

Which points AIConfigurator supports (each other point is listed with the reason):
- its systems: the hardware ids in ``SYSTEMS`` (NVIDIA only; it has no AMD data);
- a closed loop at a stated concurrency (``batch_size`` = concurrency), or a burst of ``num_prompts`` requests
  estimated as a closed loop of min(num_prompts, the framework's default running-request cap) users — AIConfigurator
  has no finite-run mode, so bursts are its steady state, as they are not for us;
- an offline run (``trtllm-bench throughput``) has no published concurrency: AIConfigurator needs one, so these
  points are not compared;
- the model's Hugging Face repository must be one of its bundled configs (no download here).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "aiconfigurator_validation.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiconfigurator_reference import PACKAGE, ensure_venv  # noqa: E402 -- the same venv as the reference script

#: store hardware id → AIConfigurator system name
SYSTEMS = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "b200-sxm": "b200_sxm", "gb200": "gb200",
           "a100-80gb-sxm": "a100_sxm", "l40s": "l40s", "b300-sxm": "b300_sxm", "gb300": "gb300"}
#: running-request caps of a burst when the run does not state one: vLLM's --max-num-seqs default (256 on GPUs)
#: and SGLang's, which sizes it from memory (256 used here as well); TensorRT-LLM's max_batch_size default 2048
BURST_CAP = {"vllm": 256, "sglang": 256, "trtllm": 2048}
#: our weight/KV format names → AIConfigurator quant modes (None: the checkpoint's own, inferred by AIConfigurator)
GEMM = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": None, "nvfp4": "nvfp4", "mxfp4": None}
KV = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", None: None}
METRICS = ("tpot_s", "ttft_s", "output_tokens_per_s_per_device")
WITHIN = 0.25


# --------------------------------------------------------------------------- phase 1: the points (project venv)

def points_phase() -> list[dict]:
    from knowledge.loader import catalog_lookup, default_catalog  # noqa: PLC0415 -- project venv only
    from knowledge.validation import report

    lookup = catalog_lookup(default_catalog())
    rep = report(lookup)
    tasks = []
    for row in rep["rows"]:
        if not row["compared"]:
            continue
        req, task = row["request"], {"id": row["id"], "source": row["source"], "hardware": row["hardware"],
                                     "model": row["model"], "framework": row["framework"], "load": row["load"],
                                     "measured": row["measured"], "ours": row["predicted"]}
        point = lookup("benchmark", row["id"])
        why = _unsupported(req, point)
        if why:
            task["skip"] = why
        else:
            task["call"] = _call(req, point)
        tasks.append(task)
    return tasks


def _unsupported(req: dict, point: dict) -> str | None:
    if req["hardware"] not in SYSTEMS:
        return f"AIConfigurator has no system for {req['hardware']}"
    if not point.get("model_hf"):
        return "the point names no Hugging Face repository"
    if "concurrency" not in req and "num_prompts" not in req:
        return "no concurrency published (offline or Poisson): AIConfigurator's agg estimate needs one"
    return None


def _call(req: dict, point: dict) -> dict:
    fw = req["framework"]
    conc = req.get("concurrency") or min(int(req["num_prompts"]), BURST_CAP[fw])
    tp, ep = int(req.get("tp", 1)), int(req.get("ep", 1))
    kw = {"mode": "agg", "backend_name": fw, "isl": int(round(req["input_tokens"])),
          "osl": int(round(req["output_tokens"])), "batch_size": int(conc), "pp_size": int(req.get("pp", 1))}
    if req.get("dp_attention"):
        kw.update(tp_size=1, attention_dp_size=tp, moe_tp_size=1, moe_ep_size=tp)
    else:
        kw.update(tp_size=tp, moe_ep_size=ep, moe_tp_size=max(tp // ep, 1))
    wf = req.get("weight_format")
    if GEMM.get(wf):
        kw["gemm_quant_mode"] = GEMM[wf]
        kw["moe_quant_mode"] = GEMM[wf]
    if KV.get(req.get("kv_format")):
        kw["kvcache_quant_mode"] = KV[req["kv_format"]]
    return {"model": point["model_hf"], "system": SYSTEMS[req["hardware"]], "kwargs": kw,
            "replicas": int(req.get("replicas", 1))}


# --------------------------------------------------------------------------- phase 2: AIConfigurator (its venv)

def estimate_phase(tasks: list[dict]) -> list[dict]:
    import logging

    logging.disable(logging.WARNING)  # the package logs every fallback table it loads
    from aiconfigurator.cli.api import cli_estimate

    for t in tasks:
        call = t.get("call")
        if not call:
            continue
        try:
            r = cli_estimate(call["model"], call["system"], **call["kwargs"])
        except Exception as exc:  # noqa: BLE001 -- recorded, not raised: one failing point must not stop the rest
            t["aic_error"] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        raw = r.raw
        t["aic"] = {"tpot_s": float(r.tpot) / 1e3, "ttft_s": float(r.ttft) / 1e3,
                    "output_tokens_per_s_per_device": float(raw["tokens/s/gpu"]),
                    "version": raw.get("version"), "parallel": raw.get("parallel"), "gemm": raw.get("gemm"),
                    "kvcache": raw.get("kvcache"), "moe": raw.get("moe")}
    return tasks


# --------------------------------------------------------------------------- phase 3: compare (project venv)

def _err(pred, meas):
    if pred is None or meas is None or not meas > 0 or not math.isfinite(pred):
        return None
    return pred / meas - 1.0


def _stats(errs: list[float]) -> dict:
    a = [abs(e) for e in errs]
    return {"n": len(a), "median_abs_error": statistics.median(a) if a else None,
            "within_25_percent": sum(e <= WITHIN for e in a) / len(a) if a else None}


def compare(tasks: list[dict]) -> dict:
    both = [t for t in tasks if "aic" in t]
    for t in both:
        t["errors"] = {who: {m: _err(t[who].get(m), t["measured"].get(m)) for m in METRICS} for who in ("ours", "aic")}

    def table(key) -> dict:
        groups: dict[str, list] = {}
        for t in both:
            groups.setdefault(key(t), []).append(t)
        return {g: {who: {m: _stats([e for t in ts if (e := t["errors"][who][m]) is not None]) for m in METRICS}
                    for who in ("ours", "aic")} | {"points": len(ts)} for g, ts in sorted(groups.items())}

    return {"package": PACKAGE, "points": len(tasks), "compared_by_both": len(both),
            "overall": table(lambda t: "all"), "by_source": table(lambda t: t["source"]),
            "by_hardware": table(lambda t: t["hardware"]), "by_load": table(lambda t: t["load"]),
            "not_supported": {t["id"]: t.get("skip") or t.get("aic_error") for t in tasks if "aic" not in t},
            "rows": tasks}


def _pct(x):
    return "—" if x is None else f"{100 * x:.0f} %"


def print_table(res: dict) -> None:
    print(f"AIConfigurator 0.12.0 vs serving-estimate on {res['compared_by_both']} of {res['points']} compared points")
    for title in ("overall", "by_source", "by_hardware", "by_load"):
        print(f"\n{title}")
        print(f"{'':44s} {'n':>3s}  {'TPOT ours':>9s} {'AIC':>6s}  {'±25% ours':>9s} {'AIC':>5s}  "
              f"{'tok/dev ours':>12s} {'AIC':>6s}  {'TTFT ours':>9s} {'AIC':>6s}")
        for g, e in res[title].items():
            o, a = e["ours"], e["aic"]
            print(f"{g:44s} {e['points']:3d}  {_pct(o['tpot_s']['median_abs_error']):>9s} "
                  f"{_pct(a['tpot_s']['median_abs_error']):>6s}  {_pct(o['tpot_s']['within_25_percent']):>9s} "
                  f"{_pct(a['tpot_s']['within_25_percent']):>5s}  "
                  f"{_pct(o['output_tokens_per_s_per_device']['median_abs_error']):>12s} "
                  f"{_pct(a['output_tokens_per_s_per_device']['median_abs_error']):>6s}  "
                  f"{_pct(o['ttft_s']['median_abs_error']):>9s} {_pct(a['ttft_s']['median_abs_error']):>6s}")
    reasons: dict[str, int] = {}
    for why in res["not_supported"].values():
        reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
    print("\nnot compared by AIConfigurator:")
    for why, n in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"  {n:3d} × {why}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--phase", choices=("all", "estimate"), default="all", help=argparse.SUPPRESS)
    ap.add_argument("--tasks", help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=int, default=0, help="estimate only the first N supported points")
    args = ap.parse_args()
    if args.phase == "estimate":  # inside AIConfigurator's venv
        tasks = json.loads(Path(args.tasks).read_text())
        Path(args.tasks).write_text(json.dumps(estimate_phase(tasks)))
        return
    sys.path.insert(0, str(ROOT))
    tasks = points_phase()
    if args.limit:
        keep = [t["id"] for t in tasks if "call" in t][: args.limit]
        tasks = [t for t in tasks if t["id"] in keep]
    python = ensure_venv()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(tasks, fh)
    subprocess.run([str(python), __file__, "--phase", "estimate", "--tasks", fh.name], check=True)
    tasks = json.loads(Path(fh.name).read_text())
    os.unlink(fh.name)
    res = compare(tasks)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(res, indent=1, default=float) + "\n")
    print_table(res)
    print(f"\nwrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
