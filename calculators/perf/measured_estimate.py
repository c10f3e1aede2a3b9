"""The measured estimate beside the peak-rate bound, the same way in every calculator that times a step.

Contract: a request field `estimate` = "bound" | "measured" | "both" (default: "both" where measured kernels
exist for the hardware, else "bound"), and `framework` = "vllm" | "sglang" | "trtllm" (default vllm: whose
measured kernels). Outputs keep `time_s` (or the calculator's own step time) as the bound and add
`measured_time_s`, its per-op parts, the measured/bound ratio, the share of extrapolated lookups and of ops
that fell back to the bound, and the framework and version of every table read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field

from calculators.domain import (
    format_label, hardware_architecture, hardware_kind, hardware_spec, layout_of, model_record, record,
    shipped_weight_formats,
)
from calculators.framework import CalcInputError, Lookup, Result, first, fmt_s, num, out

Estimate = Literal["bound", "measured", "both"]
ESTIMATE_FIELD = Field(None, description="bound: peak-rate bound only; measured: also the estimate from measured kernels "
                       "(NVIDIA AIConfigurator's tables, a 422 where none exist); both: the two side by side. Default: "
                       "both where measured kernels exist for the hardware, else bound.")
MeasuredFramework = Literal["vllm", "sglang", "trtllm"]
FRAMEWORK_FIELD = Field("vllm", description="Serving framework whose measured kernels the measured estimate reads: vllm "
                        "(vLLM), sglang (SGLang) or trtllm (TensorRT-LLM), one version of each per GPU as NVIDIA "
                        "AIConfigurator measured them. MoE, MLA, DSA, linear-attention and all-to-all kernels are the "
                        "framework's own; GEMM, attention and all-reduce tables are vLLM's for every framework. An op the "
                        "framework has no table for on that GPU falls back to its bound and is named in the assumptions.",
                        examples=["vllm"])


def measured_system_of(lookup: Lookup, hardware_id: str | None) -> str | None:
    """The measured system of a hardware id (None when none is measured)."""
    if not hardware_id:
        return None
    try:
        return (lookup("measurement", "systems").get("hardware") or {}).get(hardware_id)
    except KeyError:
        return None


@dataclass(frozen=True)
class Proxy:
    """The measured system a device without kernel tables borrows: `system`, measured on `hardware`, its kernel times
    × `scale` (the proxy's memory bandwidth ÷ the device's: decode kernels are bandwidth-bound)."""

    system: str
    hardware: str
    scale: float
    reason: str


#: a proxy's memory bandwidth may differ from the device's by at most this factor (1.7: an H100 PCIe, 2.0 TB/s, may
#: borrow the H100 SXM's Hopper kernels, 3.35 TB/s, rather than an A100's, which have no FP8)
PROXY_MAX_RATIO = 1.7


def proxy_system_of(lookup: Lookup, hw: Any) -> Proxy | None:
    """The measured system a data-centre GPU without kernel tables borrows (None for a measured device, one that is
    not a data-centre GPU, or one no measured system is near): among the measured devices at most PROXY_MAX_RATIO
    away in memory bandwidth, first one of the same architecture, then one with the device's FP4 and FP8 tensor
    cores, then the nearest in bandwidth; ties go to the smaller hardware id. Its kernel times are scaled by the
    bandwidth ratio."""
    if measured_system_of(lookup, hw.id) is not None or not hw.memory_bandwidth_bytes_per_s:
        return None
    try:
        if hardware_kind(record(lookup, "hardware", hw.id, "hardware")) != "data-centre-gpu":
            return None
        systems = (lookup("measurement", "systems").get("hardware") or {})
    except (KeyError, CalcInputError):
        return None

    def has(spec, precision: str) -> bool:
        try:
            return spec.peak(precision).flop_per_s > 0
        except CalcInputError:
            return False

    mine = hardware_architecture(lookup, hw.id)

    best = None
    for hid in sorted(systems):
        try:
            cand = hardware_spec(lookup, hid, "hardware")
        except CalcInputError:
            continue
        if not cand.is_device or not cand.memory_bandwidth_bytes_per_s:
            continue
        dist = abs(math.log(cand.memory_bandwidth_bytes_per_s / hw.memory_bandwidth_bytes_per_s))
        if dist > math.log(PROXY_MAX_RATIO):
            continue
        key = (mine is None or hardware_architecture(lookup, hid) != mine, has(hw, "FP4") and not has(cand, "FP4"),
               has(hw, "FP8") and not has(cand, "FP8"), round(dist, 9), hid)
        if best is None or key < best[0]:
            best = (key, hid, cand)
    if best is None:
        return None
    _, hid, cand = best
    scale = cand.memory_bandwidth_bytes_per_s / hw.memory_bandwidth_bytes_per_s
    why = (f"{hw.id} has no measured kernels: the kernel times are those measured on {hid} ({systems[hid]}), the "
           "measured device chosen by architecture, tensor-core precisions and memory bandwidth "
           f"({num(cand.memory_bandwidth_bytes_per_s / 1e12, 3)} vs {num(hw.memory_bandwidth_bytes_per_s / 1e12, 3)} "
           f"TB/s), × {num(scale, 3)} (the bandwidth ratio: decode kernels are bandwidth-bound); the collectives are "
           "this device's link")
    return Proxy(systems[hid], hid, scale, why)


def kernel_source(lookup: Lookup, hw: Any, estimate: str | None) -> tuple[str | None, Proxy | None]:
    """(measured system, proxy) whose kernel tables a step on `hw` reads under `estimate`: its own system; else,
    unless `estimate` is "measured" (the device's own tables) or "bound", a proxy's (`proxy_system_of`); else
    (None, None). The serving estimate and the planner choose the same way."""
    if estimate == "bound":
        return None, None
    name = measured_system_of(lookup, hw.id)
    if name is not None or estimate == "measured":
        return name, None
    proxy = proxy_system_of(lookup, hw)
    return (proxy.system, proxy) if proxy is not None else (None, None)


def estimate_system(lookup: Lookup, hw: Any, estimate: str | None):
    """The measured kernels an `estimate` of `bound`/`auto`/`measured` reads on hardware `hw`: None for `bound` or
    for hardware with no measured system under `auto`; a 422 naming `estimate` when `measured` is asked without one."""
    if estimate == "bound":
        return None
    from calculators.perf.measured_tables import load_system
    name = measured_system_of(lookup, hw.id)
    if name is not None:
        return load_system(lookup, name, hw)
    if estimate == "measured":
        raise CalcInputError("estimate", f"no measured kernels for hardware {hw.id!r}; use estimate='bound'")
    return None


def _skip(mode: str | None, why: str, res: Result) -> None:
    if mode == "measured":
        raise CalcInputError("estimate", f"no measured estimate: {why}; use estimate='bound'")
    res.assume(f"No measured estimate: {why}.")


def step_estimate(req, lookup: Lookup, res: Result, *, arch, hardware_id: str | None, phase: str, batch: Any,
                  tokens: Any, context_tokens: Any, tp: Any, weight_format: Any, kv_format: Any,
                  bound_s: Any, framework: str | None = None) -> dict:
    """Outputs of the measured estimate of a decode or prefill step (empty when not asked for or not possible), on
    `framework`'s kernels (default: the request's `framework`, else vllm)."""
    from calculators.perf.measured_step import decode_step, prefill_step
    from calculators.perf.measured_tables import collected, directory_note, load_system

    mode = getattr(req, "estimate", None)
    if mode == "bound":
        return {}
    if hardware_id is None and mode != "measured":
        return {}   # explicit rates: nothing to look up, nothing to say
    system_name = measured_system_of(lookup, hardware_id)
    if system_name is None:
        _skip(mode, f"no measured kernels for hardware {hardware_id!r}" if hardware_id else "no hardware id given", res)
        return {}
    rec = model_record(req, lookup, None, required=False) if (getattr(req, "model", None) or getattr(req, "hf_config", None)) else None
    model = arch
    if rec is not None and rec.layer_groups:
        try:
            model = layout_of(rec)          # every layer group as it is (windows, hybrids, DSA, linear attention)
        except CalcInputError:
            model = arch
    if model is None:
        _skip(mode, "the model's layers are not itemised, so its kernels cannot be looked up", res)
        return {}
    hw = hardware_spec(lookup, hardware_id)
    try:
        fw = framework or getattr(req, "framework", None) or "vllm"
        system = load_system(lookup, system_name, hw, framework=fw)
        shipped = shipped_weight_formats(rec.weight_dtype) if rec is not None and getattr(req, "weight_format", None) is None else None
        wf, kf = (shipped.for_component if shipped else format_label(weight_format)), format_label(kv_format)
        if phase == "decode":
            est = decode_step(model, system, batch=batch, context_tokens=context_tokens, tp=tp, weight_dtype=wf, kv_dtype=kf,
                              framework=fw)
        else:
            est = prefill_step(model, system, batch=batch, tokens=tokens, tp=tp, weight_dtype=wf, kv_dtype=kf,
                               context_tokens=context_tokens, framework=fw)
    except CalcInputError as exc:
        _skip(mode or "both", exc.message, res)
        return {}
    for table in est.tables:          # the tables the estimate read, each with its framework, version and file
        rec = system.tables[table]
        res.cite({"record": system_name, "field": f"measured {table} ({rec.get('framework')} {collected(rec)}{directory_note(rec)})",
                  "value": None, "source": "aiconfigurator-core-0.12.0",
                  "locator": f"{rec.get('file')} (sha256 {str(rec.get('sha256'))[:12]}…)"})
    total = np.asarray(est.total_s, dtype=float)
    bound = np.asarray(bound_s, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(bound > 0, total / np.where(bound > 0, bound, 1.0), np.nan)
    res.step("measured estimate", "Σ over ops of the measured kernel time (interpolated), × layers",
             " + ".join(f"{k} {fmt_s(first(v))}" for k, v in est.parts_s.items() if np.any(np.asarray(v) > 0)),
             total, "s")
    res.step("measured / bound", "t_measured / t_bound", f"{fmt_s(first(total))} / {fmt_s(first(bound))}", ratio, "×")
    frac = np.asarray(est.extrapolated_fraction, dtype=float)
    res.assume(f"Measured estimate: {est.framework} {est.version} kernels measured on {system_name} "
               f"({system.tables[next(iter(system.tables))].get('gpu', '?')}) by NVIDIA AIConfigurator (Apache-2.0), "
               "interpolated to this shape and summed op by op with no overlap; "
               f"{num(first(frac) * 100, 3)} % of the lookups fell outside the measured range and were scaled from the "
               "nearest measured efficiency. Not modelled: " + "; ".join(est.not_modelled) + ".")
    res.step("measured kernels", "framework and version of each table read",
             "; ".join(f"{t.removesuffix('_perf')}: {v}" for t, v in est.tables.items()), len(est.tables), "tables")
    borrowed = sorted(t.removesuffix("_perf") for t, v in est.tables.items() if not v.startswith(est.framework))
    if borrowed:
        res.assume(f"{est.framework} has no measured {', '.join(borrowed)} table(s) here: those ops use vLLM's kernels "
                   "(the tables name the framework of each).")
    if est.fallback_s:
        share = np.asarray(est.fallback_fraction, dtype=float)
        res.assume(f"Fell back to the bound ÷ this step's GEMM efficiency ({num(first(share) * 100, 3)} % of the measured "
                   "step): " + "; ".join(f"{op} ({est.fallback_why.get(op, 'no table')})" for op in est.fallback_s) + ".")
    return {
        "measured_time_s": out(total),
        "measured_parts_s": {k: out(np.asarray(v, dtype=float)) for k, v in est.parts_s.items()},
        "measured_to_bound_ratio": out(ratio),
        "measured_extrapolated_fraction": out(frac),
        "measured_fallback_fraction": out(np.asarray(est.fallback_fraction, dtype=float) + 0.0 * total),
        "measured_kernels": {"system": system_name, "framework": est.framework, "version": est.version,
                             "tables": dict(est.tables)},
    }
