"""Serving estimates against published measurements: `serving-estimate` recomputed for every stored benchmark point
(`knowledge/data/benchmarks/`), predicted beside measured, and the error distribution by source, hardware, model
family and framework (issue #25, item 4).

A point is compared when the store can describe its deployment: the model and the accelerator have store records,
the framework is vLLM, SGLang or TensorRT-LLM, the load is a closed loop, a Poisson rate (MLPerf's Server scenario is
one, at its target QPS) or offline, and the mean input and output lengths are published. Every other point is listed
with the reason it is not compared, so the coverage of the validation is as visible as its error.

How a point becomes a request (each rule is stated in the row's `mapping`):
- `fp4` is NVFP4 on NVIDIA and MXFP4 on AMD (sources such as InferenceX write both as fp4);
- a random dataset drawn with a range ratio r uses lengths uniform in [r, 1] × nominal, so the mean is
  nominal × (1 + r) / 2;
- a static batch (all requests started together) is compared as a closed loop of that many users;
- a run whose `num_prompts` is published is simulated as that finite run (all at once when the rate is inf), with
  lengths uniform over [r, 1] × nominal for a range ratio r, and over [0, 2] × the means for ShareGPT;
- `ep` not stated for an MoE run is 1 (experts sliced by tensor parallelism), `dp_attention` not stated is off.

Errors are predicted / measured − 1: positive means the estimate is slower (TPOT) or faster (tokens/s) than the
measurement. Nothing is fitted here: these are the errors of the uncalibrated estimate.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

from calculators.framework import CalcInputError, Lookup, runner

#: frameworks the estimate has a scheduler and kernels for
FRAMEWORKS = ("vllm", "sglang", "trtllm")
#: published weight/KV precision names → format names (fp4 by vendor, below)
FORMATS = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": "mxfp4", "int4": "int4",
           "int8": "int8"}
AMD = ("mi", "amd")
#: the share of points within this error that the issue's target counts
WITHIN = 0.25


@dataclass
class Row:
    """One benchmark point: its request, or why there is none, and the predicted and measured figures."""

    id: str
    source: str
    model: str | None
    hardware: str | None
    framework: str
    load: str
    compared: bool
    reason: str | None = None
    mapping: list[str] = field(default_factory=list)
    request: dict | None = None
    measured: dict = field(default_factory=dict)
    predicted: dict = field(default_factory=dict)
    errors: dict = field(default_factory=dict)
    basis: str | None = None
    bound_below_measured: bool | None = None

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _stat(node: Any, *keys: str) -> float | None:
    if not isinstance(node, dict):
        return None
    for k in keys:
        v = node.get(k)
        if isinstance(v, (int, float)) and v > 0:
            return float(v)
    return None


def _format(name: Any, hardware: str | None, mapping: list[str], what: str) -> str | None:
    if not isinstance(name, str):
        return None
    low = name.lower()
    if low == "fp4":
        amd = (hardware or "").startswith(AMD)
        mapping.append(f"{what} fp4 read as {'MXFP4 (AMD)' if amd else 'NVFP4 (NVIDIA)'}")
        return "mxfp4" if amd else "nvfp4"
    return FORMATS.get(low)


def request_of(point: dict, lookup: Lookup) -> tuple[dict | None, str | None, list[str]]:
    """(serving-estimate request, None, mapping notes) for a point the store can describe, else (None, reason, [])."""
    mapping: list[str] = []
    model, hw, fw = point.get("model"), point.get("hardware"), point.get("framework")
    if not model:
        return None, f"model {point.get('model_hf')!r} is not in the catalogue", []
    if not hw:
        return None, f"accelerator {point.get('hardware_name')!r} is not in the catalogue", []
    if fw not in FRAMEWORKS:
        return None, f"framework {point.get('framework_name') or fw!r} has no measured kernels or scheduler model here", []
    load = point.get("load") or {}
    body: dict[str, Any] = {"model": model, "hardware": hw, "framework": fw, "tp": int(point.get("tp") or 1),
                            "pp": int(point.get("pp") or 1), "replicas": int(point.get("replicas") or 1)}
    cfg = point.get("config") or {}
    if point.get("dp_attention"):
        body["dp_attention"] = True
    if point.get("ep"):
        body["ep"] = int(point["ep"])
    elif point.get("ep") is None:
        mapping.append("ep not stated: 1 (experts sliced over the TP ranks)")
    if cfg.get("spec_decoding") or cfg.get("speculative"):
        return None, "speculative decoding is not modelled by serving-estimate yet", []
    wf = _format(point.get("weight_format"), hw, mapping, "weights")
    if wf is not None:
        body["weight_format"] = wf
    kf = _format(point.get("kv_format"), hw, mapping, "KV")
    if kf is not None:
        body["kv_format"] = kf
    isl, osl = point.get("input_tokens"), point.get("output_tokens")
    if not isl or not osl:
        return None, "mean input or output length not published", []
    ratio = cfg.get("random_range_ratio")
    if isinstance(ratio, (int, float)) and 0 < ratio < 1 and point.get("dataset") == "random":
        scale = (1 + ratio) / 2
        isl, osl = isl * scale, osl * scale
        mapping.append(f"random lengths with range ratio {ratio}: means {scale:g} × nominal")
    body["input_tokens"], body["output_tokens"] = max(1, round(isl)), max(1, round(osl))
    if "concurrency" in load:
        body["concurrency"] = int(load["concurrency"])
        if cfg.get("static_batch"):
            mapping.append("static batch compared as a closed loop of that many users")
        kind = "concurrency"
    elif "requests_per_s" in load:
        body["arrival_rate_per_s"] = float(load["requests_per_s"])
        kind = "poisson"
    elif load.get("server_scenario") and load.get("target_qps"):
        body["arrival_rate_per_s"] = float(load["target_qps"])
        mapping.append("MLPerf Server: Poisson arrivals at the target QPS")
        kind = "poisson"
    elif load.get("offline"):
        kind = "offline"
        if isinstance(cfg.get("num_prompts"), int) and str(cfg.get("request_rate", "")).lower() == "inf":
            kind = "burst"
            mapping.append(f"all {cfg['num_prompts']:,} prompts sent at once: a simulated burst")
    else:
        return None, f"load {sorted(load)} not modelled", []
    if isinstance(cfg.get("num_prompts"), int) and cfg["num_prompts"] > 0 and kind in ("concurrency", "burst"):
        body["num_prompts"] = cfg["num_prompts"]
    if ratio is not None and isinstance(ratio, (int, float)) and 0 < ratio < 1 and "num_prompts" in body:
        body["output_tokens_spread"] = body["input_tokens_spread"] = round((1 - ratio) / (1 + ratio), 6)
    if point.get("dataset") == "sharegpt" and "num_prompts" in body:
        body["output_tokens_spread"] = body["input_tokens_spread"] = 1.0
        mapping.append("ShareGPT lengths vary widely: uniform over [0, 2] × their means in the simulated run")
    for k in ("max_num_seqs",):
        if isinstance(cfg.get(k), int) and cfg[k] > 0:
            body[k] = cfg[k]
    if isinstance(cfg.get("max_num_batched_tokens"), int) and cfg["max_num_batched_tokens"] > 0:
        body["chunked_prefill_tokens"] = cfg["max_num_batched_tokens"]
    return body, kind, mapping


def _err(pred: float | None, meas: float | None) -> float | None:
    if pred is None or meas is None or not (meas > 0) or not math.isfinite(pred):
        return None
    return pred / meas - 1.0


def validate_point(point: dict, lookup: Lookup) -> Row:
    measured = point.get("measured") or {}
    load = point.get("load") or {}
    base = dict(id=point["id"], source=point.get("source", "?"), model=point.get("model"),
                hardware=point.get("hardware"), framework=point.get("framework", "?"),
                load=next(iter(load), "?"))
    meas = {"tpot_s": _stat(measured.get("tpot_s"), "mean", "median") or _stat(measured.get("itl_s"), "mean", "median"),
            "ttft_s": _stat(measured.get("ttft_s"), "mean", "median"),
            "output_tokens_per_s_per_device": measured.get("output_tokens_per_s_per_device")}
    body, kind, mapping = request_of(point, lookup)
    if body is None:
        return Row(**base, compared=False, reason=kind, measured=meas)
    try:
        _, _, res = runner.compute("serving-estimate", body, lookup)
    except CalcInputError as exc:
        return Row(**base, compared=False, reason=f"the estimate refuses it: {exc}", request=body, mapping=mapping,
                   measured=meas)
    o = res.outputs
    pred = {"tpot_s": o["tpot_s"]["mean"], "ttft_s": o["ttft_s"]["mean"],
            "output_tokens_per_s_per_device": o["output_tokens_per_s_per_device"]}
    errors = {k: _err(pred[k], meas[k]) for k in pred}
    bound = o.get("bound_tpot_s")
    below = None if (bound is None or meas["tpot_s"] is None) else bool(bound <= meas["tpot_s"])
    base["load"] = kind
    return Row(**base, compared=True, mapping=mapping, request=body, measured=meas, predicted=pred,
               errors={k: v for k, v in errors.items() if v is not None}, basis=o["basis"], bound_below_measured=below)


def points(lookup: Lookup) -> list[dict]:
    try:
        ids = lookup("ids", "benchmark")
    except KeyError:
        return []
    return [lookup("benchmark", i) for i in sorted(ids)]


def summary(rows: list[Row], key: Callable[[Row], str] | None = None) -> dict[str, dict]:
    """Per group: compared points, median |error| and the share within ±25 % of TPOT, tokens/s per device, TTFT."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        if r.compared:
            groups.setdefault(key(r) if key else "all", []).append(r)
    out = {}
    for g, rs in sorted(groups.items()):
        entry: dict[str, Any] = {"points": len(rs)}
        for metric in ("tpot_s", "output_tokens_per_s_per_device", "ttft_s"):
            errs = [abs(r.errors[metric]) for r in rs if metric in r.errors]
            entry[metric] = {"n": len(errs), "median_abs_error": statistics.median(errs) if errs else None,
                             "within_25_percent": (sum(e <= WITHIN for e in errs) / len(errs)) if errs else None}
        checked = [r.bound_below_measured for r in rs if r.bound_below_measured is not None]
        entry["bound_below_measured"] = {"n": len(checked), "holds": sum(checked)}
        out[g] = entry
    return out


def family_of(r: Row) -> str:
    m = (r.model or "").lower()
    for fam in ("llama", "deepseek", "qwen", "gpt-oss", "mixtral", "gemma", "kimi", "glm"):
        if m.startswith(fam):
            return fam
    return m.split("-")[0] or "?"


def report(lookup: Lookup) -> dict:
    """Every point's row and the error tables by source, hardware, model family and framework."""
    rows = [validate_point(p, lookup) for p in points(lookup)]
    return {
        "points": len(rows),
        "compared": sum(r.compared for r in rows),
        "overall": summary(rows).get("all", {"points": 0}),
        "by_source": summary(rows, lambda r: r.source),
        "by_hardware": summary(rows, lambda r: r.hardware or "?"),
        "by_model_family": summary(rows, family_of),
        "by_framework": summary(rows, lambda r: r.framework),
        "by_load": summary(rows, lambda r: r.load),
        "not_compared": {r.id: r.reason for r in rows if not r.compared},
        "rows": [r.as_dict() for r in rows],
    }


__all__ = ["FRAMEWORKS", "Row", "family_of", "points", "report", "request_of", "summary", "validate_point"]
