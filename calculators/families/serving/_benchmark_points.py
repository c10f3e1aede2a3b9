"""Published benchmark points as `serving-estimate` requests (private to the serving family): the one mapping the
validation (knowledge/validation.py) and the estimate's "nearest published run" both use.

How a point becomes a request (each rule met is returned as a note):
- `fp4` is NVFP4 on NVIDIA and MXFP4 on AMD (sources such as InferenceX write both as fp4);
- a random dataset drawn with a range ratio r uses lengths uniform in [r, 1] × nominal, so the mean is
  nominal × (1 + r) / 2;
- a static batch (all requests started together) is compared as a closed loop of that many users;
- a run whose `num_prompts` is published is simulated as that finite run (all at once when the rate is inf), with
  lengths uniform over [r, 1] × nominal for a range ratio r, and over [0, 2] × the means for ShareGPT;
- MLPerf's Server scenario is Poisson arrivals at its target QPS;
- a weight format that is one of the model's published checkpoint formats reads the checkpoint per component as
  shipped (gpt-oss's "mxfp4" is MXFP4 experts beside BF16 attention);
- KV format not stated for TensorRT-LLM with an FP8 or FP4 checkpoint is FP8 (those checkpoints quantize the KV
  cache; stated per row as an assumption);
- `ep` not stated for an MoE run is 1 (experts sliced by tensor parallelism), `dp_attention` not stated is off.
"""
from __future__ import annotations

import math
from typing import Any

from calculators.domain import hardware_architecture, record, shipped_weight_formats
from calculators.framework import CalcInputError, Lookup, ids_of

#: frameworks the estimate has a scheduler and kernels for
FRAMEWORKS = ("vllm", "sglang", "trtllm")
#: published weight/KV precision names → format names (fp4 by vendor, below)
FORMATS = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": "mxfp4", "int4": "int4",
           "int8": "int8"}
AMD = ("mi", "amd")


def stat(node: Any, *keys: str) -> float | None:
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


def _shipped(lookup: Lookup, model: str) -> set[str]:
    """Format names of a store model's published checkpoint (a mixed one lists each component's)."""
    try:
        shipped = shipped_weight_formats(record(lookup, "model", model, "model").weight_dtype)
    except CalcInputError:
        return set()
    if shipped is None:
        return set()
    return {shipped.main.name, *(f.name for f in shipped.components.values())}


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
    spec = cfg.get("spec_decoding") or cfg.get("speculative")
    if spec and not (isinstance(spec, dict) and (spec.get("acceptance_rate") or spec.get("mean_accepted_tokens"))):
        return None, (f"speculative decoding ({spec}) without a published acceptance rate: serving-estimate takes "
                      "acceptance as an input and never fits it"), []
    if spec:
        body["speculative"] = {k: spec[k] for k in ("method", "draft_tokens", "acceptance_rate", "mean_accepted_tokens")
                               if spec.get(k) is not None}
        mapping.append("speculative decoding with its published acceptance")
    wf = _format(point.get("weight_format"), hw, mapping, "weights")
    if wf is not None and wf in _shipped(lookup, model):
        mapping.append(f"weights {wf}: the model's published checkpoint, read per component as shipped")
    elif wf is not None:
        body["weight_format"] = wf
    kf = _format(point.get("kv_format"), hw, mapping, "KV")
    if kf is None and fw == "trtllm" and (point.get("weight_format") or "").lower() in ("fp8", "fp4", "nvfp4"):
        kf = "fp8"
        mapping.append("KV not stated, TensorRT-LLM with an FP8/FP4 checkpoint: FP8 KV cache (NVIDIA's quantized "
                       "checkpoints set kv_cache_quant_algo FP8; an assumption, not a published figure of the run)")
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
        at_once = str(cfg.get("request_rate", "")).lower() == "inf" or cfg.get("all_prompts_at_once") is True
        if isinstance(cfg.get("num_prompts"), int) and at_once:
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
    if fw == "trtllm" and str(cfg.get("moe_backend", "")).upper() == "TRTLLM":
        body["moe_kernel"] = "trtllm"
        mapping.append("TensorRT-LLM launched with moe_config backend TRTLLM: its generated MoE kernels (moe_kernel "
                       "trtllm), which TensorRT-LLM's own table does not measure")
    for k in ("max_num_seqs",):
        if isinstance(cfg.get(k), int) and cfg[k] > 0:
            body[k] = cfg[k]
    if isinstance(cfg.get("max_num_batched_tokens"), int) and cfg["max_num_batched_tokens"] > 0:
        body["chunked_prefill_tokens"] = cfg["max_num_batched_tokens"]
    return body, kind, mapping


def measured_figures(point: dict) -> dict:
    """The figures a point is compared on: mean TPOT (else median, else ITL), mean TTFT (else median), output
    tokens/s per device; None where the source prints none."""
    m = point.get("measured") or {}
    return {"tpot_s": stat(m.get("tpot_s"), "mean", "median") or stat(m.get("itl_s"), "mean", "median"),
            "ttft_s": stat(m.get("ttft_s"), "mean", "median"),
            "output_tokens_per_s_per_device": m.get("output_tokens_per_s_per_device")}


def nearest_points(lookup: Lookup, model: str, hardware: str, framework: str, tp: int, input_tokens: int,
                   output_tokens: int, concurrency: float | None, limit: int = 1) -> list[tuple[float, dict, dict, list[str]]]:
    """The stored points closest to a deployment that map to a request: (distance, point, request, notes), nearest
    first. Distance: a different model or accelerator counts 3, another framework 1, and the log-ratios of TP,
    input and output lengths and concurrency add up."""
    found = []
    for ident in ids_of(lookup, "benchmark"):
        p = record(lookup, "benchmark", ident, "benchmark")
        if p.get("model") != model and p.get("hardware") != hardware:
            continue
        body, kind, notes = request_of(p, lookup)
        if body is None:
            continue
        d = 3.0 * (p.get("model") != model) + 3.0 * (p.get("hardware") != hardware) + 1.0 * (p.get("framework") != framework)
        d += abs(math.log(max(body["tp"], 1) / max(tp, 1)))
        d += abs(math.log(body["input_tokens"] / input_tokens)) + abs(math.log(body["output_tokens"] / output_tokens))
        c = body.get("concurrency")
        if concurrency is not None and c is not None:
            d += abs(math.log(c / concurrency))
        elif (concurrency is None) != (c is None):
            d += 1.0
        found.append((d, p, body, notes))
    found.sort(key=lambda t: (t[0], t[1]["id"]))
    return found[:limit]


#: the lookup kind that answers fitted efficiency factors (`knowledge.serving_calibration` fits them over a built
#: store; a lookup without them answers KeyError and the estimate stays uncalibrated)
CALIBRATION = "serving_calibration"
#: what the figures of a calibration group mean, for the answer
_GROUP = {"framework": "this hardware × framework", "hardware": "this hardware, any framework",
          "family-framework": "this architecture's devices × framework", "family": "this architecture's devices, any framework"}
#: the prefix of a group of every device of one architecture (as hardware records name it, e.g. "arch:CDNA 3")
FAMILY = "arch:"


def calibration_key(hardware: str, framework: str, basis: str) -> str:
    """The id of a factor: hardware (or `FAMILY` + an architecture), framework ("*": any) and the basis of the step
    times ("measured", "proxy" or "bound")."""
    return f"{hardware}/{framework}/{basis}"


def hardware_family(lookup: Lookup, hardware: str) -> str | None:
    """The architecture group of a hardware id ("arch:CDNA 3"), None when its record names no architecture."""
    arch = hardware_architecture(lookup, hardware)
    return f"{FAMILY}{arch}" if arch else None


def candidate_keys(hardware: str, framework: str, basis: str, family: str | None) -> list[tuple[str, str]]:
    """The factors a deployment may use, first found first: (key, group) for hardware × framework, the hardware with
    any framework, then its architecture's devices × framework and with any framework."""
    keys = [(calibration_key(hardware, framework, basis), "framework"), (calibration_key(hardware, "*", basis), "hardware")]
    if family:
        keys += [(calibration_key(family, framework, basis), "family-framework"),
                 (calibration_key(family, "*", basis), "family")]
    return keys


def fitted_factor(lookup: Lookup, hardware: str, framework: str, basis: str = "bound") -> dict | None:
    """The store's fitted factor record for this deployment (the first of `candidate_keys`), with its `key`; None
    when there is none."""
    for key, _ in candidate_keys(hardware, framework, basis, hardware_family(lookup, hardware)):
        try:
            return {**record(lookup, CALIBRATION, key, "calibration"), "key": key}
        except CalcInputError:
            continue
    return None


def has_factor(lookup: Lookup, hardware: str, framework: str, basis: str = "bound") -> bool:
    """Whether the store has a fitted factor for this deployment (any of `candidate_keys`)."""
    return fitted_factor(lookup, hardware, framework, basis) is not None


def calibration(wanted: str, res, lookup: Lookup, hardware: str, framework: str, basis: str) -> dict:
    """The efficiency factor for this hardware × framework × basis (else the hardware with any framework, else its
    architecture's devices), as the answer's `calibration` block; `factor` multiplies every step time when `applied`.
    The answer says which factor it used, how many published points and sources it was fitted on, and the error such
    factors showed on sources left out of their fit."""
    out = {"requested": wanted, "applied": False, "factor": None, "group": None, "points": 0, "sources": [],
           "leave_one_source_out": None}
    if wanted == "none":
        res.assume("Calibration: none (calibration='none'): the step times are the model's, unscaled.")
        return out
    for key, group in candidate_keys(hardware, framework, basis, hardware_family(lookup, hardware)):
        try:
            rec = record(lookup, CALIBRATION, key, "calibration")
        except CalcInputError:
            continue
        k = float(rec["factor"])
        label = _GROUP[group] + (f" ({key.split('/')[0].removeprefix(FAMILY)})" if group.startswith("family") else "")
        out.update(applied=True, factor=k, group=label,
                   points=int(rec.get("points") or 0), sources=list(rec.get("sources") or []),
                   leave_one_source_out=rec.get("leave_one_source_out"))
        loso = out["leave_one_source_out"] or {}
        t = (loso.get("tpot_s") or {}).get("median_abs_error")
        d = (loso.get("output_tokens_per_s_per_device") or {}).get("median_abs_error")
        said = ", ".join(f"{name} {v * 100:.0f} %" for name, v in (("TPOT", t), ("tokens/s per device", d))
                         if v is not None)
        res.step("calibration factor", f"median published / estimated step time over {out['group']} "
                 f"({basis} step times)", f"{out['points']} points from {len(out['sources'])} source(s): "
                 + ", ".join(out["sources"]), k, "×")
        res.assume(f"Calibrated (calibration='auto'): every step time × {k:.3g}, the efficiency factor fitted on "
                   f"{out['points']} published points of {out['group']} ({', '.join(out['sources'])}); with each "
                   "source left out of the fit, its points were off by a median "
                   + (said or "(not measured: a single source)") + ". The floor bound_tpot_s is not scaled.")
        return out
    res.assume(f"Calibration: no factor for {hardware} with {framework} ({basis} step times): fewer than 2 "
               "published points to fit one on (or no fitted factors in this store), so the step times are unscaled.")
    return out


__all__ = ["CALIBRATION", "FAMILY", "FRAMEWORKS", "calibration", "calibration_key", "candidate_keys", "hardware_family", "fitted_factor", "has_factor", "measured_figures",
           "nearest_points", "request_of"]
