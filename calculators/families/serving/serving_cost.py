"""Serving cost: devices per replica, decode throughput, replicas and cost per million tokens.

Two methods side by side:
- `bandwidth` (default): a replica needs devices for weights + KV of `batch` sequences at
  `context_tokens`. With a model whose layers are itemised and a hardware id, the decode step is the step
  model's (`_serving_cost_step`): devices = the smallest valid tensor-parallel degree that holds one rank's
  weights and KV, the step = the bound of one rank's kernels + the TP all-reduces over the hardware's link, the
  measured estimate over the same operations. With bare numbers (`params`, `weight_bytes_per_param`,
  `kv_bytes_per_token`, explicit memory and bandwidth) it is the first-pass formula: one decode step reads the
  weights once and each sequence's KV once, so a replica yields batch / ((W + batch·KV) / (devices × bandwidth))
  tokens/s.
- `page`: the compendium page's `serving_cost_analysis` heuristic (scaling section of the
  compendium seed): devices = ceil-ish(1.2 × model size / memory), throughput = 500 / (params in
  billions × bits / 16) tok/s per device, times the devices. Kept as the page computes it,
  including its int(x + 0.99) rounding.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_s, Fraction, Lookup,
    NonNegFloat, NonNegIntSweep, num, out, OutCountSweep, Outputs, OutSweep, PosFloat, PosInt, PosIntSweep, Profile,
    request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.domain import (
    arch_from_record, format_label, FormatField as Format, FORMATS, groups_from_model, hardware_spec, kv_sizes,
    MODEL_CONFIG_FIELD, model_record, model_weight_bytes, note_scope, PRICE_RULE, resolve_format, shipped_weight_formats,
    stored_device_price, usable_memory_bytes,
)
from calculators.perf import ESTIMATE_FIELD, Estimate, step_estimate
from calculators.families.serving._serving_cost_step import MAX_TP, measured as step_measured, plan as step_plan, step_layout


class ServingCostRequest(CalcRequest):
    method: Literal["bandwidth", "page"] = Field("bandwidth", description="Which method fills the top-level outputs; both are reported under `methods` when their inputs are known.")
    model: str | None = Field(None, min_length=1, max_length=100, description="Model id (params_total and the KV shape from the store).", examples=["llama-3.1-70b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    estimate: Estimate | None = ESTIMATE_FIELD
    params: PosFloat | None = Field(None, description="Parameter count instead of a model id.", examples=[70e9])
    weight_bytes_per_param: Annotated[float, Field(gt=0, le=8, allow_inf_nan=False)] | None = Field(
        None, description="Stored bytes per parameter (BF16 2, INT8 1, INT4 0.5). Default: the model's published weight "
                          "format (per component when mixed), else 2 (BF16).")
    kv_bytes_per_token: NonNegFloat | None = Field(None, description="KV bytes per token per sequence (default: from the model's layer groups at kv_format; 0 with `params`).")
    kv_format: Format = Field("bf16", description="KV value format when the KV size comes from the model.")
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: memory_bytes and memory_bandwidth_bytes_per_s.", examples=["h100-sxm"])
    memory_per_device_bytes: PosFloat | None = Field(None, description="Device memory capacity in bytes (80 GiB = 85899345920; a decimal 80 GB = 80e9).")
    memory_bandwidth_bytes_per_s: PosFloat | None = Field(None, description="Device memory bandwidth in B/s.")
    price_per_device_hour_usd: PosFloat | None = Field(
        None, description="Price of one device for one hour, USD. Default with `hardware`: the store's default price of "
                          "that device (cited; the deployment planner's rule): per provider the newest on-demand GPU-hour "
                          "offer, stale ones (over 12 months old) dropped, the lowest of the rest.", examples=[8.0])
    target_tokens_per_s: PosFloat = Field(description="Output tokens per second the service must deliver.", examples=[1000])
    batch: PosIntSweep | None = Field(None, description="Sequences decoded together per replica. Sweepable. Default: the largest "
                                      "power of two that fits the replica's memory and keeps the decode step within "
                                      "`tpot_s`.", examples=[[1, 16, 64]])
    tpot_s: PosFloat = Field(0.05, description="Decode-step target used to choose the batch when none is given "
                                    "(default 50 ms: 20 tokens/s per user, a common interactive target).")
    context_tokens: NonNegIntSweep = Field(0, description="Average tokens in each sequence's KV cache. Sweepable.", examples=[4096])
    memory_utilization: Fraction = Field(0.9, description="Usable fraction of device memory for weights + KV (> 0; default 0.9, "
                                         "vLLM's gpu_memory_utilization, the memory rule of every calculator).")
    runtime_reserve_bytes: NonNegFloat = Field(0.0, description="Bytes reserved per device on top of that (default 0).")
    bandwidth_efficiency: Fraction = Field(1.0, description="Achieved fraction of memory bandwidth (> 0); 1 = ideal bound.")
    tp: PosInt | None = Field(None, le=MAX_TP, description="Devices per replica, as the tensor-parallel degree (default: the fewest that hold "
                              "the weights and the batch's KV; with the step model, the smallest degree that also splits "
                              "the heads evenly).", examples=[4])
    ep: PosInt = Field(1, description="Expert-parallel ranks inside the TP group (MoE, step model; default 1).")
    weight_format: Format | None = Field(None, description="Weight format for the step model (default: the model's "
                                         "published one); instead of weight_bytes_per_param.")
    link: str | None = Field(None, min_length=1, max_length=100, description="Link id of the tensor-parallel group "
                             "(step model; default: the hardware's first listed link).", examples=["nvlink4"])

    @model_validator(mode="after")
    def _check(self):
        if sum(v is not None for v in (self.model, self.hf_config, self.params)) != 1:
            raise ValueError("give exactly one of model, model_config, params")
        if self.hardware and (self.memory_per_device_bytes is not None or self.memory_bandwidth_bytes_per_s is not None):
            raise ValueError("give hardware or explicit memory/bandwidth, not both")
        if not self.hardware and self.memory_per_device_bytes is None:
            raise ValueError("give hardware or memory_per_device_bytes")
        if not self.hardware and self.price_per_device_hour_usd is None:
            raise ValueError("give price_per_device_hour_usd (or hardware, whose stored default price is used)")
        if self.weight_format is not None and self.weight_bytes_per_param is not None:
            raise ValueError("give weight_format or weight_bytes_per_param, not both")
        return self


# --------------------------------------------------------------------------- outputs

#: a number, or one per point when `batch` or `context_tokens` is swept (null where not finite)
#: a whole count of devices or replicas per point (a float past 2^53; null where no finite count suffices)


class ServingCostMeasuredKernelsOut(Outputs):
    """Which measured kernel tables the estimate reads."""

    system: str = Field(description="Measured system id.")
    framework: str = Field(description="Framework the kernels were measured in.")
    version: str = Field(description="Its version.")
    tables: dict[str, str] = Field(description="Framework and version of each table read, by table name.")


class ServingCostBandwidthOut(Outputs):
    """The bandwidth method: memory-bound decode of `batch` sequences per replica."""

    batch: int | list[int] = Field(description="Sequences decoded together per replica (given, or the largest power "
                                   "of two that fits and meets tpot_s).")
    weight_bytes: float | None = Field(description="Weights of one replica, B.")
    kv_bytes_per_token: float | None = Field(description="KV per token of one sequence, B/token.")
    kv_bytes_per_sequence: OutSweep = Field(description="KV of one sequence at context_tokens, B.")
    memory_per_replica_bytes: OutSweep = Field(description="weights + batch × KV, B.")
    devices_per_replica: OutCountSweep = Field(description="Step model: the smallest valid TP degree whose rank holds "
                                               "its weights + KV; formula: ⌈memory / usable memory per device⌉, devices.")
    step_time_s: OutSweep = Field(description="Decode step. Step model: the bound of one rank's kernels + the TP "
                                  "all-reduces over the link; formula: memory / (devices × bandwidth × efficiency), s.")
    step_basis: Literal["step model", "bandwidth formula"] = Field("bandwidth formula", description="Which of the two "
                                                                    "gave step_time_s.")
    kernel_time_s: OutSweep = Field(None, description="The step's kernels on one rank at the peak rates, s (step model).")
    comm_time_s: OutSweep = Field(None, description="The step's TP all-reduces over the link (α–β), s (step model).")
    tokens_per_s_per_replica: OutSweep = Field(description="batch / step time, tokens/s.")
    replicas: OutCountSweep = Field(description="⌈target / tokens per replica⌉, replicas.")
    total_devices: OutCountSweep = Field(description="devices per replica × replicas, devices.")
    cost_per_hour_usd: OutSweep = Field(description="total devices × price, USD/h.")
    cost_per_mtok_usd: OutSweep = Field(description="Cost per million output tokens at the replicas' full "
                                          "capacity, USD.")
    cost_per_mtok_at_target_usd: OutSweep = Field(description="Cost per million tokens at the target rate, USD.")
    capacity_utilization: OutSweep = Field(description="target / (replicas × tokens per replica), a fraction.")
    measured_time_s: OutSweep = Field(None, description="Decode step from measured kernels, s (measured estimate).")
    measured_parts_s: dict[str, OutSweep] | None = Field(None, description="Measured time per op, s (measured "
                                                           "estimate).")
    measured_to_bound_ratio: OutSweep = Field(None, description="measured / bandwidth-bound step time.")
    measured_extrapolated_fraction: OutSweep = Field(None, description="Share of kernel lookups outside the "
                                                       "measured range.")
    measured_fallback_fraction: OutSweep = Field(None, description="Share of the measured time from ops with no measured table (their bound ÷ the step's measured GEMM efficiency).")
    measured_kernels: ServingCostMeasuredKernelsOut | None = Field(None, description="The kernel tables read.")
    measured_tokens_per_s_per_replica: OutSweep = Field(None, description="batch / measured step, tokens/s.")
    measured_cost_per_mtok_usd: OutSweep = Field(None, description="Cost per million tokens at the measured "
                                                   "rate, USD.")


class ServingCostPageOut(Outputs):
    """The compendium page's serving_cost_analysis heuristic, as it computes it."""

    model_size_gb: float | None = Field(description="params × bits / 8, GB (decimal, 10⁹ B).")
    devices_per_replica: int = Field(description="max(1, int(1.2 × size / memory GB + 0.99)), devices.")
    tokens_per_s_per_device: float | None = Field(description="500 / (params in billions × bits / 16), tokens/s.")
    tokens_per_s_per_replica: float | None = Field(description="Per device × devices per replica, tokens/s.")
    replicas: int = Field(description="max(1, int(target / per replica + 0.99)), replicas.")
    total_devices: int = Field(description="devices per replica × replicas, devices.")
    cost_per_hour_usd: float | None = Field(description="total devices × price, USD/h.")
    cost_per_mtok_usd: float | None = Field(description="Cost per million tokens, USD.")


class ServingCostMethodsOut(Outputs):
    bandwidth: ServingCostBandwidthOut | None = Field(None, description="The bandwidth method (with a bandwidth or "
                                                      "hardware).")
    page: ServingCostPageOut | None = Field(description="The page's heuristic (null when its arithmetic fails for "
                                            "these inputs).")


class ServingCostOutputs(Outputs):
    """Outputs of serving-cost: the chosen `method`'s figures at the top level, both methods under `methods`; lists
    where `batch` or `context_tokens` is swept."""

    method: Literal["bandwidth", "page"] = Field(description="The method whose figures fill the top level.")
    methods: ServingCostMethodsOut = Field(description="Each method's figures.")
    devices_per_replica: OutCountSweep = Field(description="Devices per replica.")
    tokens_per_s_per_replica: OutSweep = Field(description="Decode throughput of one replica, tokens/s.")
    replicas: OutCountSweep = Field(description="Replicas for target_tokens_per_s.")
    total_devices: OutCountSweep = Field(description="devices per replica × replicas, devices.")
    cost_per_hour_usd: OutSweep = Field(description="Price of all devices, USD/h.")
    cost_per_mtok_usd: OutSweep = Field(description="Cost per million output tokens at full capacity, USD.")
    batch: int | list[int] | None = Field(None, description="Sequences per replica (bandwidth).")
    weight_bytes: float | None = Field(None, description="Weights of one replica, B (bandwidth).")
    kv_bytes_per_token: float | None = Field(None, description="KV per token of one sequence, B/token (bandwidth).")
    kv_bytes_per_sequence: OutSweep = Field(None, description="KV of one sequence, B (bandwidth).")
    memory_per_replica_bytes: OutSweep = Field(None, description="weights + batch × KV, B (bandwidth).")
    step_time_s: OutSweep = Field(None, description="Decode step (bound), s (bandwidth).")
    step_basis: Literal["step model", "bandwidth formula"] | None = Field(None, description="Which of the two gave "
                                                                           "step_time_s (bandwidth).")
    kernel_time_s: OutSweep = Field(None, description="The step's kernels on one rank at the peak rates, s (step model).")
    comm_time_s: OutSweep = Field(None, description="The step's TP all-reduces over the link (α–β), s (step model).")
    cost_per_mtok_at_target_usd: OutSweep = Field(None, description="Cost per million tokens at the target rate, "
                                                    "USD (bandwidth).")
    capacity_utilization: OutSweep = Field(None, description="Share of the replicas' capacity the target uses "
                                             "(bandwidth).")
    measured_time_s: OutSweep = Field(None, description="Decode step from measured kernels, s (bandwidth, measured "
                                        "estimate).")
    measured_parts_s: dict[str, OutSweep] | None = Field(None, description="Measured time per op, s.")
    measured_to_bound_ratio: OutSweep = Field(None, description="measured / bandwidth-bound step time.")
    measured_extrapolated_fraction: OutSweep = Field(None, description="Share of kernel lookups outside the "
                                                       "measured range.")
    measured_fallback_fraction: OutSweep = Field(None, description="Share of the measured time from ops with no measured table (their bound ÷ the step's measured GEMM efficiency).")
    measured_kernels: ServingCostMeasuredKernelsOut | None = Field(None, description="The kernel tables read.")
    measured_tokens_per_s_per_replica: OutSweep = Field(None, description="batch / measured step, tokens/s.")
    measured_cost_per_mtok_usd: OutSweep = Field(None, description="Cost per million tokens at the measured rate, "
                                                   "USD.")
    model_size_gb: float | None = Field(None, description="Model size, GB (decimal; page).")
    tokens_per_s_per_device: float | None = Field(None, description="The page's tokens/s per device (page).")


def page_method(params: float, bits: float, mem_gb: float, price: float, target: float) -> dict:
    """The compendium page's arithmetic, step for step (our reimplementation)."""
    params_b = params / 1e9
    model_size_gb = params_b * 1e9 * bits / 8 / 1e9
    if not (mem_gb > 0 and params_b * bits / 16 > 0 and math.isfinite(model_size_gb * 1.2 / mem_gb)):
        raise CalcInputError("params", "too small or too large for the page's arithmetic (a division underflows or overflows)")
    # the page's counts are whole devices; past 2^53 float64 no longer counts them exactly (and no cluster is that big)
    if model_size_gb * 1.2 / mem_gb + 0.99 >= 2**53:
        raise CalcInputError("params", "the page's arithmetic needs more than 2^53 devices per replica")
    gpus = max(1, int((model_size_gb * 1.2) / mem_gb + 0.99))
    per_gpu = 500 / (params_b * bits / 16)
    if not (per_gpu > 0 and math.isfinite(per_gpu) and math.isfinite(target / (per_gpu * gpus))):
        raise CalcInputError("params", "too small or too large for the page's arithmetic (a division underflows or overflows)")
    total = per_gpu * gpus
    if target / total + 0.99 >= 2**53 or gpus * (target / total + 0.99) >= 2**53:
        raise CalcInputError("target_tokens_per_s", "the page's arithmetic needs more than 2^53 devices")
    replicas = max(1, int(target / total + 0.99))
    total_gpus = gpus * replicas
    cost_hr = total_gpus * price
    cost_m = cost_hr / (total * replicas * 3600 / 1e6)
    return {"model_size_gb": model_size_gb, "devices_per_replica": gpus, "tokens_per_s_per_device": per_gpu,
            "tokens_per_s_per_replica": total, "replicas": replicas, "total_devices": total_gpus,
            "cost_per_hour_usd": cost_hr, "cost_per_mtok_usd": cost_m}


BATCH_LADDER = 2 ** np.arange(0, 13)   # 1 … 4096


def _largest_batch(W: float, kv_seq: np.ndarray, usable: float, bw: float, target_s: float, res: Result) -> np.ndarray:
    """Per context point, the largest power-of-two batch whose KV fits beside the weights on the devices the weights
    need, and whose bandwidth-bound decode step stays within `target_s` (1 when even that misses the target)."""
    dev = np.maximum(1.0, np.ceil(W / usable - 1e-12))
    ladder = BATCH_LADDER[:, None].astype(float)
    need = W + ladder * kv_seq.reshape(1, -1)
    ok = (need <= dev * usable) & (need / (dev * bw) <= target_s)
    idx = np.where(ok.any(axis=0), ok.shape[0] - 1 - np.argmax(ok[::-1], axis=0), 0)
    chosen = BATCH_LADDER[idx].astype(float).reshape(kv_seq.shape)
    res.step("batch (chosen)", "largest 2^k with W + batch × KV ≤ devices × usable and step ≤ tpot target",
             f"{num(chosen.reshape(-1)[0])} on {num(dev)} device(s), target {fmt_s(target_s)}", chosen, "sequences")
    res.assume(f"No batch given: the largest power-of-two batch that fits the memory of the {num(dev)} device(s) the "
               f"weights need and keeps the bandwidth-bound decode step within {fmt_s(target_s)} (tpot_s) is used"
               + ("; even batch 1 misses that target." if not ok.any() else "."))
    return chosen


def _measured(req, lookup: Lookup, res: Result, rec: dict, b, ctx, dev, bound_step, reps, total, price: float) -> dict:
    """The decode step from measured kernels at the same batch, context and devices (as TP), and what it costs."""
    arch = arch_from_record(rec, None, "model")
    shipped = shipped_weight_formats(rec.weight_dtype)
    est = step_estimate(req, lookup, res, arch=arch, hardware_id=req.hardware, phase="decode", batch=b,
                        tokens=1, context_tokens=ctx, tp=np.asarray(dev, dtype=np.int64),
                        weight_format=shipped.main.name if shipped is not None else "bf16",
                        kv_format=req.kv_format, bound_s=bound_step)
    if not est:
        return {}
    t = np.asarray(est["measured_time_s"], dtype=float)
    tps = b / t
    cost_h = total * price
    cost_m = cost_h / (reps * tps * 3600.0) * 1e6
    res.step("measured cost per 1M tokens", "cost/h ÷ (replicas × batch / t_measured × 3600) × 1e6",
             f"${num(first(cost_h))}/h ÷ ({num(first(reps))} × {num(first(tps))} × 3600) × 1e6", cost_m, "USD")
    est.update(measured_tokens_per_s_per_replica=out(tps), measured_cost_per_mtok_usd=out(cost_m))
    return est


def compute(req: ServingCostRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    rec = None
    if req.model or req.hf_config is not None:
        rec = model_record(req, lookup, res)
        params = float(rec.value("params_total", loc="model"))
        res.cite(rec.source("params_total"))
    else:
        params = float(req.params)
    mem, bw = req.memory_per_device_bytes, req.memory_bandwidth_bytes_per_s
    if req.hardware:
        hw = hardware_spec(lookup, req.hardware, "hardware")
        note_scope(res, hw)
        mem = hw.require("memory_bytes", "hardware")
        bw = hw.require("memory_bandwidth_bytes_per_s", "hardware")
        hw.cite(res, "memory_bytes", "memory_bandwidth_bytes_per_s")
    price = req.price_per_device_hour_usd
    if price is None:
        price, basis = stored_device_price(lookup, hw.id, res)
        if price is None:
            raise CalcInputError("price_per_device_hour_usd", f"{hw.id} has no current stored price: {basis}")
        res.assume(f"Price: ${price:,.2f} per device-hour, the default stored price of {hw.id}: {basis}. Rule: "
                   f"{PRICE_RULE}. Give price_per_device_hour_usd for your own.")
    res.inputs["price_per_device_hour_usd"] = price
    x = broadcast({"batch": req.batch if req.batch is not None else 1, "context_tokens": req.context_tokens})
    b, ctx = x["batch"], x["context_tokens"]
    bpp = req.weight_bytes_per_param
    if bpp is not None:
        W = params * bpp
    elif rec is not None and (req.weight_format is not None or shipped_weight_formats(rec.weight_dtype) is not None):
        W = model_weight_bytes(rec, req.weight_format, res, "weight_format" if req.weight_format is not None else "weight_bytes_per_param")
        bpp = W / params
    elif req.weight_format is not None:
        bpp = resolve_format(req.weight_format, "weight_format").effective_bits / 8.0
        W = params * bpp
        res.assume(f"Weights: {num(bpp)} bytes per parameter ({format_label(req.weight_format)}).")
    else:
        bpp = 2.0
        W = params * bpp
        res.assume("Weights: 2 bytes per parameter (BF16) unless weight_bytes_per_param says otherwise.")
    methods: dict = {}

    # ---- bandwidth method
    if bw is not None:
        if req.kv_bytes_per_token is not None:
            kv_tok = req.kv_bytes_per_token
            kv_seq = kv_tok * ctx
        elif rec is not None and rec.layer_groups:
            gspec = groups_from_model(rec, res, "model")
            kf = resolve_format(req.kv_format, "kv_format")
            kv_seq = kv_sizes(gspec, kf, FORMATS["fp32"], np.asarray(ctx, dtype=np.int64)).bytes_per_request
            kv_tok = float(kv_sizes(gspec, kf, FORMATS["fp32"], np.asarray(1, dtype=np.int64)).bytes_per_request)
            res.assume(f"KV per sequence from {rec.id}'s layer groups in {format_label(req.kv_format)}.")
        else:
            kv_tok, kv_seq = 0.0, 0.0 * ctx
            res.assume("No KV size known: KV cache is taken as zero (give kv_bytes_per_token).")
        if req.memory_utilization <= 0 or req.bandwidth_efficiency <= 0:
            raise CalcInputError("memory_utilization" if req.memory_utilization <= 0 else "bandwidth_efficiency", "must be > 0")
        usable = float(usable_memory_bytes(mem, req.memory_utilization, req.runtime_reserve_bytes))
        stepped = rec is not None and req.hardware and req.weight_bytes_per_param is None and req.kv_bytes_per_token is None
        lay = step_layout(rec, res) if stepped else None
        sp = None
        if lay is not None:
            sp = step_plan(req, lookup, res, rec, lay, hw, b, ctx, usable, req.tpot_s, BATCH_LADDER)
            if req.batch is None:
                res.inputs["batch"] = out(sp.batch)
            b, dev, step = sp.batch, sp.devices, sp.times.bound_s
            need = W + b * kv_seq
            res.step("memory per replica", "W + batch × KV(context)", f"{fmt_bytes(W)} + {num(first(b))} × {fmt_bytes(first(kv_seq))}", need, "B")
        else:
            for k in ("ep", "link"):
                if k in req.model_fields_set:
                    raise CalcInputError(k, "needs the step model: a model with itemised layers and a hardware id, without "
                                         "weight_bytes_per_param or kv_bytes_per_token")
            if req.batch is None:
                b = _largest_batch(W, np.asarray(kv_seq, dtype=float), usable, bw * req.bandwidth_efficiency, req.tpot_s, res)
                res.inputs["batch"] = out(b)
            need = W + b * kv_seq
            res.step("memory per replica", "W + batch × KV(context)", f"{fmt_bytes(W)} + {num(first(b))} × {fmt_bytes(first(kv_seq))}", need, "B")
            if req.tp is not None:
                dev = np.full(np.shape(need), float(req.tp))
                if np.any(need > dev * usable):
                    raise CalcInputError("tp", f"{req.tp} device(s) hold {fmt_bytes(req.tp * usable)} usable, the replica needs "
                                         f"{fmt_bytes(float(np.max(need)))}: give a larger tp or a smaller batch")
                res.step("devices per replica", "tp (given)", f"{req.tp}", dev, "devices")
            else:
                dev = np.maximum(1.0, np.ceil(need / usable - 1e-12))
                res.step("devices per replica", "⌈need / (M × utilization − reserve)⌉", f"⌈{fmt_bytes(first(need))} / {fmt_bytes(usable)}⌉", dev, "devices")
            step = need / (dev * bw * req.bandwidth_efficiency)
            res.step("decode step", "t = (W + batch × KV) / (devices × bandwidth)", f"{fmt_bytes(first(need))} / ({num(first(dev))} × {num(bw / 1e9)} GB/s)", step, "s")
        tps = res.step("tokens/s per replica", "batch / t", f"{num(first(b))} / {num(first(step))} s", b / step, "tok/s")
        reps = np.maximum(1.0, np.ceil(req.target_tokens_per_s / tps - 1e-12))
        res.step("replicas", "⌈target / per-replica⌉", f"⌈{num(req.target_tokens_per_s)} / {num(first(tps))}⌉", reps, "replicas")
        total = dev * reps
        cost_h = total * price
        cost_m = cost_h / (reps * tps * 3600.0) * 1e6
        res.step("cost per 1M tokens", "cost/h ÷ (replicas × tok/s × 3600) × 1e6",
                 f"${num(first(cost_h))}/h ÷ ({num(first(reps))} × {num(first(tps))} × 3600) × 1e6", cost_m, "USD")
        methods["bandwidth"] = {
            "batch": out(b), "weight_bytes": W, "kv_bytes_per_token": kv_tok, "kv_bytes_per_sequence": out(kv_seq),
            "memory_per_replica_bytes": out(need), "devices_per_replica": out(dev), "step_time_s": out(step),
            "tokens_per_s_per_replica": out(tps), "replicas": out(reps), "total_devices": out(total),
            "cost_per_hour_usd": out(cost_h), "cost_per_mtok_usd": out(cost_m),
            "cost_per_mtok_at_target_usd": out(cost_h / (req.target_tokens_per_s * 3600.0) * 1e6),
            "capacity_utilization": out(req.target_tokens_per_s / (reps * tps)),
            "step_basis": "step model" if sp is not None else "bandwidth formula",
        }
        if sp is not None:
            methods["bandwidth"].update(kernel_time_s=out(sp.times.kernels_bound_s), comm_time_s=out(sp.times.comm_s))
            methods["bandwidth"].update(step_measured(res, sp, b, reps, total, price))
        elif req.hardware and rec is not None and req.estimate != "bound":
            methods["bandwidth"].update(_measured(req, lookup, res, rec, b, ctx, dev, step, reps, total, price))
        elif req.estimate == "measured":
            raise CalcInputError("estimate", "a measured estimate needs a model and a hardware id with measured kernels")
        if sp is None:
            res.assume("Bandwidth method: decode is memory-bound; each step reads all weights once (an upper bound for MoE "
                       "at small batch) and each sequence's KV once, split evenly across the replica's devices; prefill, "
                       "compute limits and communication are not counted.")
        res.assume("Prefill and idle time are not counted; cost per 1M tokens is at full capacity of the replicas; "
                   "cost_per_mtok_at_target_usd divides by the target instead.")
    elif req.method == "bandwidth":
        raise CalcInputError("memory_bandwidth_bytes_per_s", "the bandwidth method needs a bandwidth (or a hardware id)")

    # ---- the page's heuristic
    bits = bpp * 8
    try:
        page = page_method(params, bits, mem / 1e9, price, req.target_tokens_per_s)
    except CalcInputError:
        if req.method == "page":
            raise
        page = None
    methods["page"] = page
    if req.method == "page":
        res.step("model size", "params_B × bits / 8 (GB)", f"{num(params / 1e9)} × {num(bits)} / 8", page["model_size_gb"], "GB")
        res.step("devices per replica", "max(1, int(1.2 × size / mem_GB + 0.99))",
                 f"int(1.2 × {num(page['model_size_gb'])} / {num(mem / 1e9)} + 0.99)", page["devices_per_replica"], "devices")
        res.step("tokens/s per replica", "500 / (params_B × bits / 16) × devices",
                 f"500 / ({num(params / 1e9)} × {num(bits)} / 16) × {page['devices_per_replica']}", page["tokens_per_s_per_replica"], "tok/s")
        res.step("replicas", "max(1, int(target / per-replica + 0.99))",
                 f"int({num(req.target_tokens_per_s)} / {num(page['tokens_per_s_per_replica'])} + 0.99)", page["replicas"], "replicas")
        res.step("cost per 1M tokens", "cost/h ÷ (per-replica × replicas × 3600 / 1e6)",
                 f"${num(page['cost_per_hour_usd'])} ÷ ({num(page['tokens_per_s_per_replica'])} × {page['replicas']} × 3600 / 1e6)",
                 page["cost_per_mtok_usd"], "USD")
        res.assume("Page method: reproduces the compendium's serving_cost_analysis heuristic as written. Its comment says "
                   "throughput is normalised to a 7B FP16 model at 500 tok/s, but the formula 500 / (params_B × bits / 16) "
                   "gives 500 tok/s to a 1B FP16 model; the 1.2 × size headroom stands in for KV cache; int(x + 0.99) is a "
                   "ceiling that misses fractions below 0.01; batch, context and bandwidth do not enter.")
    res.outputs = {**methods[req.method], "method": req.method, "methods": methods}
    res.headline = _headline(req, res.outputs, rec)
    return res


def _headline(req: ServingCostRequest, o: dict, rec: dict | None) -> str:
    """Cost per million tokens and the fleet that delivers the target (a sweep: its first point)."""
    n = hf.n_points(o.get("devices_per_replica"), req.batch, req.context_tokens)
    who = hf.name_of(rec) if rec is not None else f"a {hf.fmt_big(req.params)}-parameter model"
    where = f" × {req.hardware}" if req.hardware else " devices"
    text = (f"Serving {who} at {hf.fmt_num(req.target_tokens_per_s)} tokens/s costs {hf.fmt_usd(o.get('cost_per_mtok_usd'))} "
            f"per million tokens at full capacity ({o.get('method')} method")
    if o.get("method") == "bandwidth":
        chosen = "" if req.batch is not None else " (chosen to fit memory and the step target)"
        text += f", batch {hf.fmt_count(o.get('batch'))}{chosen} at {hf.fmt_count(req.context_tokens)} tokens of context"
    text += (f"): {hf.fmt_count(o.get('replicas'))} {'replica' if hf.scalar(o.get('replicas')) == 1 else 'replicas'} of "
             f"{hf.fmt_count(o.get('devices_per_replica'))} = {hf.fmt_count(o.get('total_devices'))}{where} for "
             f"{hf.fmt_usd(o.get('cost_per_hour_usd'))}/h")
    if o.get("cost_per_mtok_at_target_usd") is not None:
        text += f", or {hf.fmt_usd(o['cost_per_mtok_at_target_usd'])} per million tokens at the target rate"
    if o.get("measured_cost_per_mtok_usd") is not None:
        text += f"; measured kernels put it at {hf.fmt_usd(o['measured_cost_per_mtok_usd'])} per million tokens"
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="serving-cost",
        profile=Profile(1.2e-06, 646, 339),
        family="serving_cost",
        title="Serving cost per million tokens",
        summary="Devices per replica (weights + KV at a batch and context must fit), bandwidth-bound decode tokens/s, "
                "replicas for a target throughput, cost per hour and per 1M tokens; with the compendium page's heuristic side by side.",
        description="bandwidth: devices = ⌈(W + batch·KV)/(M·utilization)⌉, step = (W + batch·KV)/(devices·B), tok/s = "
                    "batch/step, replicas = ⌈target/tok/s⌉, cost/1M = cost/h ÷ (replicas·tok/s·3600)·1e6. page: the "
                    "compendium's serving_cost_analysis (1.2× size headroom, 500/(params_B·bits/16) tok/s per device). "
                    "Decode only; prefill, compute limits, communication and idle time are not counted.",
        request_model=ServingCostRequest,
        compute=compute,
        outputs_model=ServingCostOutputs,
        example={"params": 70e9, "weight_bytes_per_param": 2, "kv_bytes_per_token": 327680, "memory_per_device_bytes": 80e9,
                 "memory_bandwidth_bytes_per_s": 3.35e12, "price_per_device_hour_usd": 8.0, "target_tokens_per_s": 1000,
                 "batch": [1, 16, 64], "context_tokens": 4096},
        cases=("single-agent-serving-cost", "workload-and-provisioning", "inference-training-scenarios"),
        sweepable=("batch", "context_tokens"),
        chart=Chart(x="batch", y=("cost_per_mtok_usd",), x_label="batch", y_label="USD per 1M tokens"),
        extra_examples=({"method": "page", "params": 70e9, "weight_bytes_per_param": 2, "memory_per_device_bytes": 80e9,
                         "price_per_device_hour_usd": 8.0, "target_tokens_per_s": 1000},),
    ),
]
