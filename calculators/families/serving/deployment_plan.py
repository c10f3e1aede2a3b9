"""The deployment planner: model × hardware × traffic × SLO → the configuration to run, its cost, and why.

Every configuration of the search space (hardware × tensor-parallel degree × pipeline stages × expert-parallel
degree × attention data parallelism × batch, aggregated or disaggregated prefill/decode) is evaluated in one
NumPy pass per hardware over one stacked step-model operation list:
1. validity — TP divides the attention heads, KV heads split or replicate evenly, EP divides the experts and
   the TP group, PP divides the layers (else its imbalance is stated); DP attention (MoE models) runs the
   attention of 1/tp of the sequences on each rank with the experts spread over all tp ranks (ep = tp);
2. memory per device — weights sharded over TP × PP (norms and router replicated; attention replicated under DP
   attention), KV of `batch` requests at input + output tokens as kv-cache sizes it per rank (under DP attention
   each rank keeps the whole KV of its own sequences), against the one memory rule;
3. decode step (TPOT) and prefill time — the peak-rate bound, or the measured estimate (vLLM kernels from
   NVIDIA AIConfigurator's tables) where the hardware has them; TP all-reduces, DP-attention all-to-alls and
   gathers with the link's α–β; optionally skewed expert routing (`expert_skew`) and the model's MTP modules
   drafting tokens (`mtp`, off by default);
4. queueing — prefill requests at a replica wait as in M/D/1 (the book's queueing cases); the 90th
   percentile TTFT uses the M/M/1 tail as a conservative stand-in; prefill steals time from decode;
5. replicas for `arrival_rate_per_s`, devices, $/hour and $ per million output tokens.
"""
from __future__ import annotations

import gc
import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, field_validator

from calculators.domain import (
    DEFAULT_MEMORY_UTILIZATION, FORMAT_HELP, FormatField, FORMATS, groups_from_model, hardware_spec, kv_sizes, layout_of,
    MODEL_CONFIG_FIELD, model_record, note_scope, PRICE_RULE, resolve_format, stored_device_price, usable_memory_bytes,
)
from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, fmt_bytes, fmt_s, Fraction, Lookup, NonNegFloat, num, PosFloat,
    Profile, request_inputs, request_value, Result, Series,
)
from calculators.families.serving._deployment_plan_outputs import DeploymentPlanOutputs
from calculators.families.serving._benchmark_points import fitted_factor, has_factor
from calculators.families.serving._launch_config import launch_for_plan
from calculators.families.serving._plan_estimate import (
    describe_best, re_estimate, say_second_pass, second_pass_work, verified,
)
from calculators.families.serving._plan_search import (
    col, count_splits, DEFAULT_MTP_ACCEPTANCE, dp_meaningful, link_fits, link_time, max_load_for_ttft, money,
    mtp_tokens_per_step, p90_wait, rows, search_splits, step_table, weight_formats,
)
from calculators.perf import (
    bound_of, FRAMEWORK_FIELD, load_system, measured_of, measured_system_of, MeasuredFramework, kernel_source,
    rates_from_spec, Split,
    split_problems,
)
from calculators.framework import headline as H

#: the main data-centre GPUs a plan considers when the request names none
DEFAULT_HARDWARE = ("h100-sxm", "h200-sxm", "b200-sxm", "a100-80gb-sxm", "mi300x")
DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
DEFAULT_TP = (1, 2, 4, 8)
DEFAULT_PP = (1,)
MAX_CONFIGURATIONS = 200_000
Degree = Annotated[int, Field(ge=1, le=1024)]


class DeploymentPlanRequest(CalcRequest):
    """Serve `model` for `arrival_rate_per_s` requests of `input_tokens` → `output_tokens` within the SLOs, cheapest."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id in the store.", examples=["llama-3.1-70b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    weight_format: FormatField | None = Field(None, description="Weight format (default: the model's published one). " + FORMAT_HELP)
    kv_format: FormatField | None = Field(None, description="KV cache format (default bf16). " + FORMAT_HELP)
    hardware: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(
        default_factory=lambda: list(DEFAULT_HARDWARE), min_length=1, max_length=12,
        description="Hardware ids to consider (default: H100, H200, B200, A100 80GB SXM, MI300X).", examples=[["h100-sxm", "h200-sxm"]])
    link: dict[str, Annotated[str, Field(max_length=100)]] | None = Field(
        None, description="Link id of the TP group per hardware id (default: the hardware's first listed link).")
    arrival_rate_per_s: PosFloat = Field(description="Mean arrival rate of requests, per second.", examples=[10])
    input_tokens: Annotated[int, Field(ge=1, le=10_000_000)] = Field(description="Mean prompt tokens per request.", examples=[2000])
    output_tokens: Annotated[int, Field(ge=1, le=10_000_000)] = Field(description="Mean generated tokens per request.", examples=[500])
    prefix_hit_rate: Fraction = Field(0.0, description="Fraction of prompt tokens served from a prefix cache (skipped in prefill).")
    ttft_s: PosFloat = Field(description="SLO: 90th-percentile time to first token, seconds.", examples=[2.0])
    tpot_s: PosFloat = Field(description="SLO: mean time per output token, seconds.", examples=[0.05])
    tp: list[Degree] = Field(default_factory=lambda: list(DEFAULT_TP), min_length=1, max_length=16, description="Tensor-parallel degrees.")
    pp: list[Degree] = Field(default_factory=lambda: list(DEFAULT_PP), min_length=1, max_length=16, description="Pipeline stages.")
    ep: list[Degree] | None = Field(None, max_length=16, description="Expert-parallel degrees within the TP group (MoE; default: 1 and TP).")
    batch: list[Annotated[int, Field(ge=1, le=65536)]] = Field(
        default_factory=lambda: list(DEFAULT_BATCHES), min_length=1, max_length=2048,
        description="Concurrent sequences per replica (per pipeline stage) to try.")
    mode: Literal["aggregated", "disaggregated", "both"] = Field("both", description="Aggregated replicas, separate prefill/decode pools, or both.")
    estimate: Literal["measured", "bound"] | None = Field(None, description="Step times from measured kernels (default where the "
                                                          "hardware has them) or the peak-rate bound.")
    price_per_device_hour_usd: dict[str, PosFloat] | None = Field(None, description="USD per device-hour by hardware id (overrides stored prices).")
    memory_utilization: Fraction | None = Field(None, description=f"Usable fraction of device memory (default {DEFAULT_MEMORY_UTILIZATION}).")
    runtime_reserve_bytes: NonNegFloat | None = Field(None, description="Bytes reserved per device besides (default 0).")
    framework: MeasuredFramework = FRAMEWORK_FIELD
    max_load: Annotated[float, Field(gt=0, lt=1)] = Field(0.85, description="Highest utilisation a replica's prefill queue or batch slots may run at.")
    dp_attention: Literal["auto", "on", "off"] = Field(
        "auto", description="Attention data parallelism (as SGLang and vLLM run DeepSeek): each of the tp ranks runs the "
        "whole attention for its own 1/tp of the sequences, experts spread over all ranks (ep = tp) with an all-to-all "
        "per MoE layer. auto: searched beside plain TP for MoE models; on: only DP-attention splits; off: none.")
    expert_skew: Annotated[float, Field(ge=0, le=4, allow_inf_nan=False)] = Field(
        0.0, description="Routing skew of MoE models: Zipf exponent s of expert popularity, p_e ∝ e^(−s) (0 = uniform "
        "routing, the default). The hottest expert-parallel rank sets the MoE time.", examples=[0.0])
    mtp: bool = Field(False, description="Draft with the model's multi-token-prediction modules (speculative decoding; "
                      "off by default). Each step verifies 1 + drafts tokens per sequence and runs the MTP modules.")
    mtp_acceptance_rate: Fraction | None = Field(
        None, description=f"With mtp: probability that a draft token is accepted given the earlier ones were (default "
        f"{DEFAULT_MTP_ACCEPTANCE}, the lower end of DeepSeek-V3's reported 85–90 %).")

    @field_validator("tp", "pp", "batch", "ep")
    @classmethod
    def _distinct(cls, v):
        return sorted(set(v)) if v is not None else v


# --------------------------------------------------------------------------- prices and links

def _price(req: DeploymentPlanRequest, lookup: Lookup, hw_id: str, res: Result) -> tuple[float | None, str]:
    """USD per device-hour: the request's, else the store's default price by the price rule (never a silent 0)."""
    if req.price_per_device_hour_usd and hw_id in req.price_per_device_hour_usd:
        return req.price_per_device_hour_usd[hw_id], "given in the request"
    return stored_device_price(lookup, hw_id, res)


# --------------------------------------------------------------------------- one hardware

def _evaluate(req, lookup: Lookup, res: Result, lay, groups, hw_id: str, mode_list: list[str], derate: dict, tab,
              search: dict) -> list[dict]:
    """Every configuration of one hardware, from the search's stacked step table `tab`. `derate` carries the median
    measured/bound ratios of the measured hardware evaluated before (filled here when this one is measured; applied
    here when it is not)."""
    hw = hardware_spec(lookup, hw_id, "hardware")
    note_scope(res, hw)
    hw.require_memory_and_bandwidth("hardware")
    usable = float(usable_memory_bytes(hw.memory_bytes, req.memory_utilization, req.runtime_reserve_bytes))
    price, price_note = _price(req, lookup, hw_id, res)
    fits_link, link_id, link_bw = link_fits(lookup, hw, (req.link or {}).get(hw_id))
    rates = rates_from_spec(hw)
    system = None
    sys_name, proxy = kernel_source(lookup, hw, req.estimate)   # a device without kernels may borrow a proxy's
    if sys_name:
        try:
            system = load_system(lookup, sys_name, hw)
        except CalcInputError:
            system = None
    if req.estimate == "measured" and system is None:
        raise CalcInputError("estimate", f"no measured kernels for {hw_id}; use estimate='bound'")

    # the rows: split × pipeline stages × batch, and where each sits in the stacked decode (split × batch) list
    g = search["grid"]
    T, Q, E, D, B, valid, reasons = g["T"], g["Q"], g["E"], g["D"], g["B"], g["valid"], g["reasons"]
    di, pi = g["decode_at"], g["prefill_at"]
    w_dev, kv_dev, reqs = g["w_dev"], g["kv_dev"], g["requests_on_rank"]
    mem_dev = w_dev + reqs * kv_dev
    fits = mem_dev <= usable
    reasons = np.where(valid & ~fits, "does not fit in device memory", reasons)

    # the step model on this hardware: bound, link time and (where measured) the measured kernels
    if tab.decode is None:          # no valid split: every row carries its reason
        dec_b = pre_b = dec_c = pre_c = np.zeros(1)
        system = None
    else:
        dec_b = np.asarray(bound_of(tab.decode_kernels, rates).total_s)
        pre_b = np.asarray(bound_of(tab.prefill_kernels, rates).total_s)
        dec_c = link_time(fits_link, link_bw, tab.decode)
        pre_c = link_time(fits_link, link_bw, tab.prefill)
    hand_bw = link_bw or (fits_link[0].algorithm_bytes_per_s if fits_link else hw.memory_bandwidth_bytes_per_s)
    hand_t = (Q - 1) * (B * search["tokens_per_seq"] * lay.d * 2.0 / hand_bw)
    comm_t = np.where(valid, dec_c[di] + hand_t, 0.0)
    pf_comm = np.where(valid, pre_c[pi], 0.0)
    step_bound = np.where(valid, dec_b[di] + comm_t, np.inf)
    t_prefill_bound = np.where(valid, pre_b[pi] + pf_comm, np.inf)
    fw = None
    if system is not None:
        try:
            md, mp = (measured_of(tab.decode_kernels, system, req.framework),
                      measured_of(tab.prefill_kernels, system, req.framework))
            fw = f"{md.framework} {md.version}"
        except CalcInputError as exc:
            if req.estimate == "measured":
                raise CalcInputError("estimate", f"{hw_id}: {exc.message}; use estimate='bound'") from None
            res.assume(f"{hw_id}: no measured estimate ({exc.message}); its step times are calibrated bounds.")
            system = None

    step, t_prefill, source = step_bound, t_prefill_bound, "bound (step model: peak rates, touched experts, link α–β)"
    if system is not None and fw is not None and proxy is not None:
        # kernels of the proxy device × the bandwidth ratio × the factor fitted on published runs of this one
        fit = fitted_factor(lookup, hw_id, req.framework, "proxy")
        k = float(fit["factor"]) if fit is not None else 1.0
        kern_d = (np.asarray(md.total_s) - np.asarray(md.comm_s)) * proxy.scale
        kern_p = (np.asarray(mp.total_s) - np.asarray(mp.comm_s)) * proxy.scale
        step = np.where(valid, (kern_d[di] + comm_t) * k, np.inf)
        t_prefill = np.where(valid, (kern_p[pi] + pf_comm) * k, np.inf)
        source = (f"proxy ({fw} kernels measured on {system.name} × {num(proxy.scale, 3)}, the bandwidth ratio"
                  + (f"; × {num(k, 3)}, the calibration factor fitted on {int(fit.get('points') or 0)} published runs "
                     f"({fit['key']})"
                     if fit is not None else "") + ")")
        res.assume(proxy.reason + (f"; then × {num(k, 3)}, the calibration factor fitted on published runs "
                                   f"({fit['key']}: {', '.join(fit.get('sources') or [])})." if fit is not None else "."))
    elif system is not None and fw is not None:
        step = np.where(valid, np.asarray(md.total_s)[di] + comm_t, np.inf)
        t_prefill = np.where(valid, np.asarray(mp.total_s)[pi] + pf_comm, np.inf)
        source = f"measured ({fw} kernels on {system.name}, step model per split)"
        ok = valid & fits
        if ok.any():
            derate.setdefault("tpot", []).append(float(np.median(step[ok] / step_bound[ok])))
            derate.setdefault("prefill", []).append(float(np.median(t_prefill[ok] / t_prefill_bound[ok])))
            derate.setdefault("from", []).append(hw_id)
    elif req.estimate != "bound" and (fit := fitted_factor(lookup, hw_id, req.framework)) is not None:
        # no measured kernels, but published runs on this hardware: the bound scaled by the factor fitted on them
        k = float(fit["factor"])
        step, t_prefill = step_bound * k, t_prefill_bound * k
        srcs = ", ".join(fit.get("sources") or [])
        source = (f"bound × {num(k, 3)}: the calibration factor fitted on {int(fit.get('points') or 0)} published runs "
                  f"({fit['key']}: {srcs}), as {hw_id} has no measured kernels")
        res.assume(f"{hw_id} has no measured kernels: its step times are its peak-rate bounds × {num(k, 3)}, the factor "
                   f"serving-estimate's calibration fitted on {int(fit.get('points') or 0)} published runs ({srcs}).")
    elif derate.get("tpot"):
        # no measured kernels here: scale the bound by what measured hardware in this plan showed, so that
        # measured and unmeasured devices compete on the same footing
        k_tpot, k_pf = float(np.median(derate["tpot"])), float(np.median(derate["prefill"]))
        step, t_prefill = step_bound * k_tpot, t_prefill_bound * k_pf
        source = (f"bound × {num(k_tpot, 3)} (decode) and × {num(k_pf, 3)} (prefill): the median measured/bound ratios of "
                  f"{', '.join(derate['from'])} in this plan, as {hw_id} has no measured kernels")
        res.assume(f"{hw_id} has no measured kernels: its step times are its peak-rate bounds scaled by the median "
                   f"measured/bound ratio of the measured hardware in this plan ({num(k_tpot, 3)} decode, {num(k_pf, 3)} prefill).")
    else:
        res.assume(f"{hw_id}: step times are peak-rate bounds (no measured kernels to calibrate them): optimistic, "
                   "typically by 1.3–1.9× at decode.")
    a = dict(T=T, Q=Q, E=E, D=D, B=B, valid=valid, fits=fits, reasons=reasons, mem=mem_dev, w=w_dev, kv=reqs * kv_dev,
             step=step, tpot=step / search["tokens_per_step"], t_p=t_prefill)
    const = {"step_source": source, "price_source": price_note, "link": link_id,
             "tokens_per_step": search["tokens_per_step"], "priced": price is not None}
    plans = []
    if "aggregated" in mode_list:
        plans.extend(_aggregated(req, hw_id, price, a, const))
    if "disaggregated" in mode_list:
        plans.extend(_disaggregated(req, hw, price, fits_link, link_bw, a, const, search["kv_request"]))
    return plans


def _grid(req, lay, tab) -> dict:
    """The hardware-independent columns of every row: split × pp × batch, validity, weights and KV per device."""
    n_s, nb, pp = len(tab.splits), tab.batches.size, np.asarray(req.pp)
    S, Qi, Bi = (x.ravel() for x in np.meshgrid(np.arange(n_s), np.arange(pp.size), np.arange(nb), indexing="ij"))
    T = np.asarray([s.tp for s in tab.splits])[S]
    E = np.asarray([s.ep for s in tab.splits])[S]
    D = np.asarray([s.dp_attention for s in tab.splits], dtype=bool)[S]
    Q, B = pp[Qi], tab.batches[Bi].astype(np.int64)
    why = np.full((n_s, pp.size), "", dtype=object)
    w = np.zeros((n_s, pp.size))
    for i, s in enumerate(tab.splits):
        for j, q in enumerate(pp.tolist()):
            problems = split_problems(lay, Split(s.tp, s.ep, q, s.dp_attention))
            why[i, j] = problems[0] if problems else ""
            w[i, j] = tab.weights[(i, q)]
    pos = np.maximum(tab.stack_pos, 0)
    reasons = why[S, Qi]
    return {"T": T, "Q": Q, "E": E, "D": D, "B": B, "reasons": reasons, "valid": reasons == "",
            "w_dev": w[S, Qi], "kv_dev": tab.kv_per_request[S] / Q + tab.mtp_kv_per_request[S],
            "requests_on_rank": np.where(D, np.ceil(B / T), B),
            "decode_at": pos[S] * nb + Bi, "prefill_at": pos[S]}


def _aggregated(req, hw_id, price, a: dict, const: dict) -> list[dict]:
    lam = req.arrival_rate_per_s
    T, Q, B, tpot, t_p, valid, fits = a["T"], a["Q"], a["B"], a["tpot"], a["t_p"], a["valid"], a["fits"]
    slots = B * Q
    rho_ttft = max_load_for_ttft(t_p, req.ttft_s, req.max_load)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho_tpot = np.clip(1.0 - tpot / req.tpot_s, 0.0, req.max_load)
        rho = np.minimum(rho_ttft, rho_tpot)
        r_prefill = np.where(rho > 0, lam * t_p / rho, np.inf)
        r_slots = lam * (req.output_tokens * tpot / (slots * req.max_load) + t_p)
        replicas = np.ceil(np.maximum(np.maximum(r_prefill, r_slots), 1.0) - 1e-9)
        finite = np.isfinite(replicas)
        rho_real = np.where(finite, lam * t_p / np.where(finite, replicas, 1.0), np.inf)
        tpot_eff = np.where(rho_real < 1, tpot / (1 - rho_real), np.inf)
        ttft = t_p + p90_wait(rho_real, t_p)
        devices = np.where(finite & valid & fits, replicas * T * Q, np.nan)   # no cost for what cannot run
        per_dev = lam * req.output_tokens / devices
        per_user = np.where(np.isfinite(tpot_eff) & (tpot_eff > 0), 1.0 / tpot_eff, 0.0)
    meets = valid & fits & finite & (ttft <= req.ttft_s * (1 + 1e-9)) & (tpot_eff <= req.tpot_s * (1 + 1e-9))
    fail = np.where(~valid | ~fits, a["reasons"], np.where(t_p >= req.ttft_s, "prefill alone exceeds the TTFT SLO",
                    np.where(tpot >= req.tpot_s, "the decode step alone exceeds the TPOT SLO",
                             np.where(~meets, "SLOs not met at any load", ""))))
    cost_h, cost_m, cost_t = money(price, devices, lam, req)
    n = T.size
    mem = [{"weights": w, "kv": k, "total": t} for w, k, t in zip(a["w"].tolist(), a["kv"].tolist(), a["mem"].tolist())]
    return rows({
        "tp": T.tolist(), "pp": Q.tolist(), "ep": a["E"].tolist(), "dp_attention": a["D"].tolist(),
        "batch": B.tolist(), "replicas": [int(r) if f else None for r, f in zip(replicas.tolist(), finite.tolist())],
        "total_devices": [int(d) if np.isfinite(d) else None for d in devices.tolist()],
        "ttft_s": col(ttft), "tpot_s": col(tpot_eff), "prefill_s": col(t_p), "decode_step_s": col(a["step"]),
        "tokens_per_s_per_device": col(per_dev), "tokens_per_s_per_user": col(per_user),
        "memory_per_device_bytes": mem, "fits": (fits & valid).tolist(), "meets_slo": meets.tolist(),
        "cost_per_hour_usd": col(cost_h), "cost_per_mtok_usd": col(cost_m),
        "cost_per_mtok_total_usd": col(cost_t), "prefill_load": col(rho_real),
        "reason": [r or None for r in fail.tolist()],
    }, n, {"hardware": hw_id, "mode": "aggregated", **const})


def _disaggregated(req, hw, price, fits_link, link_bw, a: dict, const: dict, kv_request: float) -> list[dict]:
    """Separate prefill and decode pools of the same hardware (pp = 1), KV shipped between them over the link."""
    lam = req.arrival_rate_per_s
    sel = a["Q"] == 1
    T, E, D, B, valid, fits, reasons, mem_dev, w_dev, kv_dev, step, tpot, t_p = (
        a[k][sel] for k in ("T", "E", "D", "B", "valid", "fits", "reasons", "mem", "w", "kv", "step", "tpot", "t_p"))
    xfer_bw = link_bw or (fits_link[0].algorithm_bytes_per_s if fits_link else None)
    xfer = kv_request / xfer_bw if xfer_bw else 0.0
    # the prefill pool: of the splits that fit, the one needing the fewest devices for the TTFT SLO
    ok = valid & fits
    rho_p = max_load_for_ttft(t_p, req.ttft_s - xfer, req.max_load)
    with np.errstate(divide="ignore", invalid="ignore"):
        pf_need = np.where((rho_p > 0) & ok, np.ceil(lam * t_p / rho_p - 1e-9) * T, np.inf)
    pf = None
    if np.isfinite(pf_need).any():
        i = int(np.argmin(pf_need))
        r_p = int(math.ceil(lam * t_p[i] / rho_p[i] - 1e-9))
        wait = float(p90_wait(np.asarray(lam * t_p[i] / r_p), np.asarray(t_p[i])))
        pf = {"tp": int(T[i]), "dp_attention": bool(D[i]), "replicas": r_p, "devices": r_p * int(T[i]),
              "prefill_s": float(t_p[i]), "kv_transfer_s": xfer, "ttft_s": float(t_p[i]) + wait + xfer}
    with np.errstate(divide="ignore", invalid="ignore"):
        r_d = np.where(ok, np.ceil(lam * req.output_tokens * tpot / (B * req.max_load) - 1e-9), np.nan)
        d_dev = r_d * T
        devices = d_dev + (pf["devices"] if pf else np.nan)
        per_dev = lam * req.output_tokens / devices
    tpot_ok = tpot <= req.tpot_s
    meets = ok & tpot_ok & (pf is not None and pf["ttft_s"] <= req.ttft_s * (1 + 1e-9))
    reason = np.where(~ok, reasons, np.where(~tpot_ok, "the decode step alone exceeds the TPOT SLO",
                      np.where(~meets, "no prefill pool meets the TTFT SLO", "")))
    cost_h, cost_m, cost_t = money(price, devices, lam, req)
    n = T.size
    mem = [{"weights": w, "kv": k, "total": t} for w, k, t in zip(w_dev.tolist(), kv_dev.tolist(), mem_dev.tolist())]
    reps = [int(r) if np.isfinite(r) else None for r in r_d.tolist()]
    ddev = [int(d) if np.isfinite(d) else None for d in d_dev.tolist()]
    return rows({
        "tp": T.tolist(), "ep": E.tolist(), "dp_attention": D.tolist(), "batch": B.tolist(), "replicas": reps,
        "total_devices": [int(d) if np.isfinite(d) else None for d in devices.tolist()],
        "tpot_s": col(tpot), "decode_step_s": col(step), "tokens_per_s_per_device": col(per_dev),
        "tokens_per_s_per_user": col(1.0 / tpot), "memory_per_device_bytes": mem, "fits": ok.tolist(),
        "meets_slo": np.asarray(meets).tolist(), "cost_per_hour_usd": col(cost_h), "cost_per_mtok_usd": col(cost_m),
        "cost_per_mtok_total_usd": col(cost_t),
        "decode_pool": [{"tp": t, "batch": b, "replicas": r, "devices": d} for t, b, r, d in zip(T.tolist(), B.tolist(), reps, ddev)],
        "ratio": [f"{pf['devices']} prefill : {d} decode" if (pf and d) else None for d in ddev],
        "reason": [r or None for r in reason.tolist()],
    }, n, {"hardware": hw.id, "mode": "disaggregated", "pp": 1, "ttft_s": pf["ttft_s"] if pf else None,
           "prefill_s": pf["prefill_s"] if pf else None, "prefill_pool": pf, **const})


# --------------------------------------------------------------------------- the answer

def _pareto(plans: list[dict]) -> list[dict]:
    """Configurations not beaten on both tokens/s per device and tokens/s per user (fitting ones)."""
    pts = [p for p in plans if p["fits"] and p["tokens_per_s_per_device"]]
    pts.sort(key=lambda p: (-p["tokens_per_s_per_user"], -p["tokens_per_s_per_device"]))
    front, best_dev = [], -1.0
    for p in pts:
        if p["tokens_per_s_per_device"] > best_dev:
            front.append(p)
            best_dev = p["tokens_per_s_per_device"]
    return front


def _why(best: dict, plans: list[dict], req) -> str:
    same = [p for p in plans if p["hardware"] == best["hardware"] and p["mode"] == best["mode"] and p["meets_slo"]]
    smaller = [p for p in plans if p["hardware"] == best["hardware"] and p["tp"] < best["tp"] and p["mode"] == best["mode"]]
    bits = []
    if smaller and not any(p["meets_slo"] for p in smaller):
        r = next((p["reason"] for p in smaller if p["reason"]), None)
        bits.append(f"a smaller TP on {best['hardware']} fails ({r})")
    slack_ttft = req.ttft_s - best["ttft_s"]
    slack_tpot = req.tpot_s - best["tpot_s"]
    binding = "TTFT" if slack_ttft / req.ttft_s < slack_tpot / req.tpot_s else "TPOT"
    bits.append(f"the binding SLO is {binding} ({fmt_s(best['ttft_s'])} of {fmt_s(req.ttft_s)} TTFT, "
                f"{fmt_s(best['tpot_s'])} of {fmt_s(req.tpot_s)} TPOT)")
    bits.append(f"{len(same)} configurations of this kind meet both SLOs; this one costs least per output token")
    return "; ".join(bits) + "."


def _nothing_meets(plans: list[dict], req) -> str:
    fitting = [p for p in plans if p["fits"]]
    if not fitting:
        return "No configuration fits in device memory: add tensor/pipeline parallelism, a smaller weight format or a smaller KV format."
    best_tpot = min(p["decode_step_s"] for p in fitting)
    best_pf = min(p["prefill_s"] for p in fitting if p["prefill_s"] is not None)
    parts = []
    if best_tpot >= req.tpot_s:
        parts.append(f"TPOT fails everywhere: the fastest decode step is {fmt_s(best_tpot)} > {fmt_s(req.tpot_s)} (relax tpot_s, "
                     "allow a larger TP or a faster GPU)")
    if best_pf >= req.ttft_s:
        parts.append(f"TTFT fails everywhere: the fastest prefill is {fmt_s(best_pf)} > {fmt_s(req.ttft_s)} (relax ttft_s, "
                     "use prefix caching or a larger TP)")
    if not any(p["priced"] for p in fitting):
        parts.append("no hardware has a price: give price_per_device_hour_usd")
    return "; ".join(parts) or "No configuration meets both SLOs at any load: relax ttft_s or tpot_s."


def _search(req, res: Result, rec, lay, groups, name: str) -> tuple[object, dict]:
    """The hardware-independent part of a plan: the splits, the stacked step table, the grid of rows, MTP yield."""
    if req.dp_attention == "on" and not dp_meaningful(lay):
        raise CalcInputError("dp_attention", f"{name} is not a MoE model: attention data parallelism (experts spread over "
                             "the ranks) is searched for MoE models only; use 'auto' or 'off'")
    if req.mtp and not lay.mtp_layers:
        raise CalcInputError("mtp", f"{name} ships no multi-token-prediction module (num_nextn_predict_layers is 0 or "
                             "absent); leave mtp off")
    splits = search_splits(lay, req.tp, req.ep, req.dp_attention)
    if not splits:
        raise CalcInputError("dp_attention" if req.dp_attention == "on" else "ep",
                             "no split to search: DP attention needs a tp > 1 that is also listed in ep and divides the "
                             "experts" if req.dp_attention == "on" else "no expert-parallel degree divides the experts and tp")
    drafts = lay.mtp_layers if req.mtp else 0
    wfun, _ = weight_formats(rec, req.weight_format)
    kfmt = resolve_format(req.kv_format, "kv_format", "bf16")
    ctx_end = req.input_tokens + req.output_tokens
    ctx_mean = req.input_tokens + req.output_tokens // 2
    prefill_tokens = max(1, int(round(req.input_tokens * (1 - req.prefix_hit_rate))))
    skew = req.expert_skew if lay.moe_layers else 0.0
    tab = step_table(lay, groups, splits, req.pp, req.batch, ctx_mean, ctx_end, prefill_tokens, wfun,
                     (repr(req.weight_format), str(rec.weight_dtype)), kfmt, skew, drafts)
    alpha = req.mtp_acceptance_rate if req.mtp_acceptance_rate is not None else DEFAULT_MTP_ACCEPTANCE
    per_step = mtp_tokens_per_step(alpha, drafts) if drafts else 1.0
    kv_request = float(kv_sizes(groups, kfmt, FORMATS["fp32"], np.asarray(req.input_tokens)).bytes_per_request)
    _state_search(req, res, lay, name, drafts, alpha, per_step, skew)
    return tab, {"grid": _grid(req, lay, tab), "tokens_per_step": per_step, "tokens_per_seq": 1 + drafts,
                 "kv_request": kv_request}


def _state_search(req, res: Result, lay, name: str, drafts: int, alpha: float, per_step: float, skew: float) -> None:
    """The assumptions of the search's options: DP attention, routing skew, MTP (each said, on or off)."""
    if dp_meaningful(lay) and req.dp_attention != "off":
        res.assume(("DP attention " + ("only" if req.dp_attention == "on" else "searched beside plain TP") + ": each of the "
                    "tp ranks runs the whole attention (weights replicated) for ceil(batch/tp) sequences and keeps their "
                    "whole KV; the experts are spread over all tp ranks (ep = tp) and tokens reach them by an all-to-all "
                    "dispatch and combine per MoE layer (timed on the TP link, the hottest rank's bytes); shared experts "
                    "run replicated on each rank's own tokens; dense layers gather every rank's tokens, run sliced over "
                    "tp and scatter back (one all-reduce's traffic). dp = tp: the attention groups are one rank each."))
    elif dp_meaningful(lay):
        res.assume("DP attention: off (as asked).")
    else:
        res.assume(f"DP attention is not searched: {name} is not a MoE model, so it would only replicate the attention "
                   "weights (plain TP splits the KV heads).")
    if lay.moe_layers:
        if skew > 0:
            res.assume(f"Routing skew: expert popularity p_e ∝ e^(−{num(skew)}) (Zipf); a token's k distinct experts are "
                       "drawn by successive sampling, expert e included with probability q_e ≈ 1 − exp(−t·p_e), Σq_e = k "
                       "(Rosén's approximation); T tokens touch Σ 1 − (1 − q_e)^T experts. Experts are dealt round-robin to "
                       "the expert ranks in order of popularity, and the hottest rank's tokens and touched experts set the "
                       "MoE time (a placement by expert id, blind to load, would be worse).")
        else:
            res.assume("Routing: uniform over the experts (expert_skew 0); give expert_skew (a Zipf exponent) for skewed routing.")
    elif req.expert_skew:
        res.assume(f"expert_skew is ignored: {name} has no MoE layers.")
    if drafts:
        res.assume(f"MTP on: {name}'s {drafts} multi-token-prediction module(s) draft {drafts} token(s) per step; each step "
                   f"verifies 1 + {drafts} positions per sequence and runs the module(s) once (over the prompt at prefill); "
                   f"their weights and one layer of KV each are counted. Acceptance α = {num(alpha)} per draft token"
                   + ("" if req.mtp_acceptance_rate is not None else " (default: the lower end of the 85–90 % acceptance of "
                      "the second token reported by the DeepSeek-V3 Technical Report, arXiv:2412.19437 §5.4.3, for its own MTP "
                      "module; other models' modules may accept less)")
                   + f"; TPOT = step ÷ (1 + α + … + α^{drafts}) = step ÷ {num(per_step, 3)}.")
        res.step("MTP tokens per step", "1 + α + … + α^drafts", " + ".join(["1"] + [f"{num(alpha)}^{i}" for i in range(1, drafts + 1)]),
                 per_step, "tokens")
    elif lay.mtp_layers:
        res.assume(f"MTP: {name} ships {lay.mtp_layers} multi-token-prediction module(s); they are off (the default): one "
                   "token per step. Pass mtp: true to draft with them.")
    elif req.mtp_acceptance_rate is not None:
        res.assume("mtp_acceptance_rate is ignored: mtp is off.")


def compute(req: DeploymentPlanRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    rec = model_record(req, lookup, res)
    lay = layout_of(rec, "model" if req.model else "model_config")
    for note in lay.notes:
        res.assume(note)
    groups = groups_from_model(rec, res, "model")
    name = rec.label
    modes = ["aggregated", "disaggregated"] if req.mode == "both" else [req.mode]
    n_configs = (len(search_splits(lay, req.tp, req.ep, req.dp_attention)) * len(req.pp) * len(req.batch)
                 * len(req.hardware) * len(modes))
    if n_configs > MAX_CONFIGURATIONS:
        raise CalcInputError("batch", f"{n_configs:,} configurations exceed {MAX_CONFIGURATIONS:,}; narrow tp, pp, batch or hardware", 413)
    tab, search = _search(req, res, rec, lay, groups, name)
    plans: list[dict] = []
    derate: dict = {}
    order = sorted(req.hardware, key=lambda h: measured_system_of(lookup, h) is None)   # measured hardware first
    # the rows are 10^4 fresh dicts and lists, none in a reference cycle: the cyclic collector would only walk them
    # again and again while they are built (about a tenth of a large plan's time), so it waits until they are done
    collecting = gc.isenabled()
    gc.disable()
    try:
        for hw_id in order:
            plans.extend(_evaluate(req, lookup, res, lay, groups, hw_id, modes, derate, tab, search))
    finally:
        if collecting:
            gc.enable()
    for note in tab.notes:
        if note not in lay.notes:
            res.assume(note)
    # the second pass: the shortlist re-estimated by serving-estimate at the plan's load, SLOs checked again
    # re-estimated: hardware with measured kernels, and hardware timed at its bound that has a fitted calibration
    # factor (serving-estimate applies it; without one the bound is as optimistic as the screen's)
    measured = {p["hardware"] for p in plans if p["step_source"].startswith(("measured", "proxy"))}
    measured |= {hw for hw in {p["hardware"] for p in plans} - measured if has_factor(lookup, hw, req.framework)}
    second = re_estimate(req, res, lookup, plans, {id(p) for p in _pareto(plans)}, measured)
    eligible = [p for p in plans if p["meets_slo"] and p["cost_per_mtok_usd"] is not None and verified(p, measured, second)]
    best = min(eligible, key=lambda p: (p["cost_per_mtok_usd"], p["total_devices"], p["tp"])) if eligible else None
    if best:
        describe_best(req, res, lookup, best)
        best["launch"] = launch_for_plan(best, req, lookup, res)
    headline = why = None
    if best:
        extra = f", {best['ratio']}" if best["mode"] == "disaggregated" and best.get("ratio") else ""
        split = f"TP {best['tp']}" + (f", EP {best['ep']}" if best["ep"] > 1 else "") + (", DP attention" if best["dp_attention"] else "")
        headline = (f"Serve {name} at {num(req.arrival_rate_per_s)} req/s on {best['total_devices']} × {best['hardware']} "
                    f"({best['mode']}, {split}, PP {best['pp']}, batch {best['batch']}, {H.plural(best['replicas'], 'replica')}{extra}) "
                    f"for {H.fmt_usd(best['cost_per_mtok_usd'])} per million output tokens "
                    f"({H.fmt_usd(best['cost_per_hour_usd'])}/h; TTFT p90 {H.fmt_seconds(best['ttft_s'])}, "
                    f"TPOT {H.fmt_seconds(best['tpot_s'])}).")
        why = _why(best, plans, req)
        res.step("memory per device", "weights / (tp × pp) + replicated + requests on the rank × KV per request per rank",
                 f"{fmt_bytes(best['memory_per_device_bytes']['weights'])} + {fmt_bytes(best['memory_per_device_bytes']['kv'])}",
                 best["memory_per_device_bytes"]["total"], "B")
        res.step("decode step", best["step_source"], fmt_s(best["decode_step_s"]), best["decode_step_s"], "s")
        res.step("prefill", "one request's prompt on the prefill replica", fmt_s(best["prefill_s"] or 0), best["prefill_s"] or 0, "s")
        if best["figures"] == "serving-estimate":
            res.step("TTFT p90, TPOT", "serving-estimate at the plan's load: continuous batching with chunked prefill, "
                     "Poisson arrivals over the replicas (TPOT = D(B) / (1 − X·P))", f"TTFT p90 {fmt_s(best['ttft_s'])}, "
                     f"TPOT {fmt_s(best['tpot_s'])} (screen: {fmt_s(best['screen']['ttft_s'])}, "
                     f"{fmt_s(best['screen']['tpot_s'])})", best["tpot_s"], "s")
        else:
            res.step("TTFT p90", "prefill + p90 queueing wait (M/M/1 tail)" + (" + KV transfer" if best["mode"] == "disaggregated" else ""),
                     fmt_s(best["ttft_s"]), best["ttft_s"], "s")
        res.step("replicas", "max(prefill load for the TTFT SLO, batch slots for the decode load)", str(best["replicas"]),
                 best["replicas"], "replicas")
        res.step("cost per 1M output tokens", "devices × $/h ÷ (req/s × output tokens × 3600) × 1e6",
                 f"{best['total_devices']} × ${num(best['cost_per_hour_usd'] / best['total_devices'], 4)} ÷ "
                 f"({num(req.arrival_rate_per_s)} × {req.output_tokens} × 3600) × 1e6", best["cost_per_mtok_usd"], "USD")
    else:
        why = _nothing_meets(plans, req)
        headline = f"No configuration serves {name} at {num(req.arrival_rate_per_s)} req/s within the SLOs: {why}"
    headline = H.sentence(headline)
    res.headline = headline
    res.assume(
        "TPOT is the decode step at the mean context (input + output/2), divided by the tokens a step yields (1 without "
        "MTP); KV is sized at input + output tokens per request.",
        "TTFT is compared at the 90th percentile: prefill plus the M/M/1 tail of the queueing wait at the replica's prefill "
        "load (conservative for near-deterministic prefill); in aggregated mode prefill time is taken from decode, "
        "stretching TPOT by 1/(1 − prefill load).",
        f"Replicas run at most {num(req.max_load * 100)} % of their batch slots and prefill capacity.",
        "Pipeline stages are traversed one after another per token (PP cuts memory, not TPOT) and hold `batch` sequences each.",
        "Without DP attention, expert parallelism stays inside the TP group (ep divides tp): experts are placed whole instead "
        "of sliced, with the same bytes per device; every rank holds every token after the TP all-reduce, so no dispatch "
        "is needed.",
        "Disaggregated plans size the prefill pool for TTFT (with the KV transfer over the hardware's link) and the decode "
        "pool for TPOT and load, on the same hardware.",
        f"Prices: the request's, else the stored default per device-hour ({PRICE_RULE}; each candidate's "
        "price_source names provider, region, date and age); a device without a current price is evaluated but never "
        "chosen.",
    )
    say_second_pass(res, second)
    res.outputs = {"headline": headline, "best": best, "why": why, "configurations_evaluated": len(plans),
                   "re_estimate": second,
                   "meeting_slo": sum(p["meets_slo"] for p in plans), "pareto": _pareto(plans), "candidates": plans}
    return res


def planner_series(request) -> Series:
    """The cost model's count of the configurations a request ranks, with the planner's own defaults for what it
    leaves out: hardware × splits × pp × batch × modes, the splits counted for a MoE model (tp × expert-parallel
    degrees, the given ones else 1 and each TP, plus a DP-attention split per tp > 1 that ep allows)."""
    tp = request_value(request, "tp") or DEFAULT_TP
    ep = request_value(request, "ep")
    splits = max(len(tp) * (len(ep) if ep else 1 + len(tp)), count_splits(list(tp), list(ep) if ep else None))
    n = (len(request_value(request, "hardware") or DEFAULT_HARDWARE) * len(request_value(request, "pp") or DEFAULT_PP)
         * len(request_value(request, "batch") or DEFAULT_BATCHES) * splits)
    modes = 1 if request_value(request, "mode") in ("aggregated", "disaggregated") else 2
    return Series(1, max(n * modes, 1), "configurations (every expert-parallel degree counted)", "batch",
                  narrow="tp, pp, ep, batch or hardware")


CALCULATORS = [Calculator(
    name="deployment-plan", family="serving_plan", title="Deployment planner",
    profile=Profile(1.5e-06, 464, 210),   # answer bytes: ~199 per configuration measured on a 220-item batch (87.6 MB)
    mcp_tool=True,
    series=planner_series,
    work=second_pass_work,
    page_section="planner",
    summary="The cheapest way to serve a model for a traffic and SLO: hardware, TP/PP/EP, batch, replicas, "
            "aggregated or disaggregated, with TTFT, TPOT and $ per million tokens, every candidate shown.",
    description=__doc__.split("\n\n", 1)[1].strip(),
    request_model=DeploymentPlanRequest, outputs_model=DeploymentPlanOutputs, compute=compute,
    example={"model": "llama-3.1-70b", "hardware": ["h100-sxm", "h200-sxm", "b200-sxm"], "arrival_rate_per_s": 10,
             "input_tokens": 2000, "output_tokens": 500, "ttft_s": 2.0, "tpot_s": 0.05},
    cases=("model-parallelism", "model-resource-accounting", "memory-bandwidth-and-concurrency", "workload-and-provisioning",
           "single-agent-serving-cost", "pd-af-heterogeneous", "profile-and-plan-ranking"),
)]
