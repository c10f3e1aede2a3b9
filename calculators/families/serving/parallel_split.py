"""`parallel-split`: choosing a tensor-parallel degree (and pipeline stages) for a decode step.

The book's first-pass decode model (case `model-parallelism`):
T(p) = (W + KV)/(p·B_hbm) + n_ar·[2(p−1)α + 2(p−1)M/(p·B_link)], n_ar = layers × all-reduces per layer.
Splitting further divides the bytes each device reads but adds all-reduce rounds, so the best p
moves with the interconnect. Optional pipeline stages add activation hand-offs and a bubble.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, ValidationError

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, fmt_bytes, fmt_rate, fmt_s, Fraction, jsonable,
    Lookup, NonNegFloat, num, out, OutNum, Outputs, OutSweep, PosFloat, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.domain import (
    arch_from_record, explain_memory_rule, Fmt, FORMAT_HELP, FormatField, FORMATS, groups_from_model, hardware_spec,
    kv_sizes, MODEL_CONFIG_FIELD, model_record, model_weight_bytes, note_scope, resolve_format,
    shipped_weight_formats,
)
from calculators.perf import collective_cost, Estimate, ESTIMATE_FIELD, resolve_link, step_estimate
from calculators.framework import headline as H


TERMS = ("memory", "compute", "communication", "handoff")


class ParallelSplitRequest(CalcRequest):
    """A decode step split over `tp` devices per stage (candidates) and `pp` pipeline stages."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id: weights (params × dtype), layers, hidden size, KV shape.", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    estimate: Estimate | None = ESTIMATE_FIELD
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: memory_bytes and memory_bandwidth_bytes_per_s.", examples=["h100-sxm"])
    interconnect: str | None = Field(None, min_length=1, max_length=100, description="Link id between the TP ranks: one-way bandwidth and latency.", examples=["nvlink4"])
    weight_bytes: NonNegFloat | None = Field(None, description="Weight bytes W of the whole model (overrides the model).", examples=[16.4e9])
    weight_bytes_per_param: Annotated[float, Field(gt=0, le=16, allow_inf_nan=False)] | None = Field(None, description="Bytes per parameter when W comes from a model (default from its weight_dtype).")
    weight_read_bytes: NonNegFloat | None = Field(None, description="Weight bytes read per step if not all of W (MoE: active experts). Default W.")
    kv_bytes: NonNegFloat | None = Field(None, description="KV/state bytes of the whole batch (overrides model × context_tokens × batch). Default 0.",
                                         examples=[1207959552])
    kv_bytes_per_value: Annotated[float, Field(gt=0, le=16, allow_inf_nan=False)] = Field(2.0, description="Bytes per cached value when KV comes from the model (BF16 = 2).")
    layers: Annotated[int, Field(ge=1, le=100_000)] | None = Field(None, description="Layers (overrides the model).", examples=[36])
    hidden_size: Annotated[int, Field(ge=1, le=10**7)] | None = Field(None, description="Hidden size (overrides the model); sets message and hand-off bytes.")
    hbm_bandwidth_bytes_per_s: PosFloat | None = Field(None, description="Effective memory bandwidth per device, bytes/s (overrides hardware).", examples=[2e12])
    memory_bytes: PosFloat | None = Field(None, description="Usable memory per device, bytes (overrides hardware, taken as given). "
                                          "Without it or hardware every candidate fits.")
    memory_utilization: Fraction | None = Field(None, description="With `hardware`: fraction of capacity usable (default 0.9, vLLM's gpu_memory_utilization).")
    runtime_reserve_bytes: NonNegFloat | None = Field(None, description="With `hardware`: bytes reserved per device on top (default 0).")
    kv_format: FormatField | None = Field(None, description="Cache format when KV comes from the model (overrides kv_bytes_per_value). " + FORMAT_HELP)
    link_alpha_s: NonNegFloat | None = Field(None, description="α of the TP link per dependent round, seconds (overrides the link).", examples=[1e-6])
    link_bandwidth_bytes_per_s: PosFloat | None = Field(None, description="One-way TP link bandwidth per rank, bytes/s (overrides the link).", examples=[200e9])
    allreduces_per_layer: Annotated[int, Field(ge=0, le=1000)] = Field(2, description="All-reduces per layer (attention + MLP = 2).")
    message_bytes: NonNegFloat | None = Field(None, description="Bytes M of each all-reduce. Default hidden × step_tokens × activation_bytes.", examples=[8192])
    activation_bytes: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)] = Field(2.0, description="Bytes per activation value (BF16 = 2).")
    tp: PosIntSweep = Field(description="Tensor-parallel candidates p (a list is the sweep; outputs follow its order).", examples=[[1, 2, 4, 8]])
    pp: Annotated[int, Field(ge=1, le=10_000)] = Field(1, description="Pipeline stages; each holds layers/pp of the model.")
    batch: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="Sequences in the step (decode: one new token each).")
    context_tokens: Annotated[int, Field(ge=0, le=10**9)] | None = Field(None, description="Tokens of history per sequence (sizes the KV from the model).", examples=[8192])
    step_tokens: Annotated[int, Field(ge=1, le=10**9)] | None = Field(None, description="Tokens processed in the step (default batch; a prefill chunk for prefill).")
    workspace_bytes: NonNegFloat = Field(0.0, description="Extra bytes per device (activations, workspace, runtime).")
    flops_per_token: NonNegFloat | None = Field(None, description="FLOPs per token of the whole model (≈ 2 × active params); with flop_per_s adds a compute time.")
    flop_per_s: PosFloat | None = Field(None, description="Effective FLOP/s per device.")
    pp_link: str | None = Field(None, min_length=1, max_length=100, description="Link id between pipeline stages (default: the TP link).")
    pp_link_alpha_s: NonNegFloat | None = Field(None, description="α of a stage hand-off, seconds (default: the TP link's α).")
    pp_link_bandwidth_bytes_per_s: PosFloat | None = Field(None, description="One-way bandwidth between stages, bytes/s (default: the TP link).")
    handoff_tensors: Annotated[int, Field(ge=1, le=16)] = Field(1, description="Tensors of [tokens, hidden] handed to the next stage (hidden_states + residual = 2).")
    microbatches: Annotated[int, Field(ge=1, le=10**6)] | None = Field(None, description="Microbatches in flight through the pipeline (gives the bubble fraction).")
    what_if: list[SplitWhatIf] = Field(default_factory=list, max_length=20, description="Variants (another link, device, batch) "
                                       "recomputed over the same candidates; each reports its step times and best tp.")


class SplitWhatIf(CalcRequest):
    """A partial request: the fields given replace the base request's (e.g. a slower interconnect)."""

    label: str | None = Field(None, max_length=200, description="Name shown for this variant.")
    interconnect: str | None = Field(None, min_length=1, max_length=100)
    link_alpha_s: NonNegFloat | None = None
    link_bandwidth_bytes_per_s: PosFloat | None = None
    hardware: str | None = Field(None, min_length=1, max_length=100)
    hbm_bandwidth_bytes_per_s: PosFloat | None = None
    memory_bytes: PosFloat | None = None
    kv_bytes: NonNegFloat | None = None
    batch: Annotated[int, Field(ge=1, le=10**9)] | None = Field(None)
    context_tokens: Annotated[int, Field(ge=0, le=10**9)] | None = Field(None)
    step_tokens: Annotated[int, Field(ge=1, le=10**9)] | None = Field(None)
    message_bytes: NonNegFloat | None = None
    allreduces_per_layer: Annotated[int, Field(ge=0, le=1000)] | None = Field(None)
    pp: Annotated[int, Field(ge=1, le=10_000)] | None = Field(None)
    workspace_bytes: NonNegFloat | None = None


# --------------------------------------------------------------------------- outputs

Term = Literal["memory", "compute", "communication", "handoff"]


class SplitCandidateOut(Outputs):
    tp: int = Field(description="Tensor-parallel degree p.")
    devices: int = Field(description="tp × pp devices.")
    memory_time_s: OutNum = Field(description="(W + KV) / (p × B_hbm), s.")
    compute_time_s: OutNum = Field(description="step tokens × FLOPs per token / (p × FLOP/s), s (0 unless given).")
    allreduce_time_s: OutNum = Field(description="One ring all-reduce, s.")
    comm_time_s: OutNum = Field(description="layers × all-reduces per layer × t_ar, s.")
    handoff_time_s: OutNum = Field(description="(pp − 1) stage hand-offs, s.")
    step_time_s: OutNum = Field(description="max(memory, compute) + communication + hand-offs, s.")
    per_device_bytes: OutNum = Field(description="(W + KV) / (tp × pp) + workspace, B.")
    free_bytes: OutNum = Field(description="Usable memory minus per_device_bytes, B (null without a capacity).")
    fits: bool = Field(description="per_device_bytes ≤ usable memory.")
    dominant: Term = Field(description="The largest term.")
    measured_step_time_s: OutNum = Field(None, description="Measured kernels + this link's all-reduces, s (measured estimate only).")


class PipelineOut(Outputs):
    stages: int
    handoff_bytes_per_token: OutNum = Field(description="tensors × hidden × bytes, B.")
    handoff_bytes: OutNum = Field(description="Bytes of one hand-off for the step's tokens, B.")
    handoff_time_s: OutNum = Field(description="One hand-off, s.")
    handoffs_time_s: OutNum = Field(description="(pp − 1) hand-offs, s.")
    link_tokens_per_s: OutNum = Field(description="Tokens per second the stage link can carry.")
    stage_time_s: OutSweep = Field(description="One balanced stage's time per step, s.")
    tokens_per_s_upper: OutSweep = Field(description="Step tokens / stage time: the pipelined throughput bound, tokens/s.")
    bubble_fraction: OutNum = Field(None, description="(pp − 1) / (m + pp − 1) (with microbatches).")
    microbatches_time_s: OutSweep = Field(None, description="(m + pp − 1) × stage time, s (with microbatches).")


class SplitWhatIfOut(Outputs):
    label: str
    step_time_s: OutSweep
    memory_time_s: OutSweep
    comm_time_s: OutSweep
    fits: bool | list[bool]
    best: SplitCandidateOut | None
    why: str
    moved: str = Field(description="How the best candidate moved from the base's, in one sentence.")


class ParallelSplitOutputs(Outputs):
    """Outputs of parallel-split: per-candidate times (s) and bytes (B); the flat fields are lists when `tp` is a list."""

    candidates: list[SplitCandidateOut]
    best: SplitCandidateOut | None = Field(description="Fastest candidate that fits (ties: the smaller tp).")
    why: str = Field(description="Why the best candidate is chosen.")
    tp: int | list[int]
    memory_time_s: OutSweep
    comm_time_s: OutSweep
    step_time_s: OutSweep
    per_device_bytes: OutSweep
    free_bytes: OutSweep
    fits: bool | list[bool]
    dominant: Term | list[Term]
    weight_bytes: OutNum = Field(description="Weight bytes W of the whole model, B.")
    kv_bytes: OutNum = Field(description="KV/state bytes of the batch, B.")
    message_bytes: OutNum = Field(description="Bytes M of each all-reduce, B.")
    allreduces: int = Field(description="All-reduces per step (layers × per layer).")
    pipeline: PipelineOut | None
    what_if: list[SplitWhatIfOut]
    measured_parts_s: dict[str, OutSweep] | None = Field(None, description="Measured time per op, s (measured estimate only).")
    measured_to_bound_ratio: OutSweep = Field(None, description="Measured / bound step time.")
    measured_extrapolated_fraction: OutSweep = Field(None, description="Fraction of lookups outside the measured range.")
    measured_fallback_fraction: OutSweep = Field(None, description="Share of the measured time from ops with no measured table (their bound ÷ the step's measured GEMM efficiency).")
    measured_kernels: dict[str, Any] | None = Field(None, description="The measured system, framework, version and tables.")
    measured_best: dict[str, Any] | None = Field(None, description="Fastest fitting candidate by the measured estimate.")


def _kv_from_model(rec: dict, tokens: int, fmt: Fmt, res: Result) -> float:
    """Bytes of one sequence's KV/state at `tokens`, from the architecture engine (as kv-cache sizes it)."""
    if not rec.layer_groups:
        raise CalcInputError("model", f"{rec.id} has no layer groups; give kv_bytes")
    groups = groups_from_model(rec, res, "model")
    return float(kv_sizes(groups, fmt, FORMATS["fp32"], np.asarray(tokens, dtype=np.int64)).bytes_per_request)


def _measured(req, lookup: Lookup, res: Result, rec, p, bound_step, comm_t, fits, context: int, kv_fmt) -> dict:
    """Per-candidate measured step times: measured kernels of the hardware's system for everything but the
    all-reduces, which keep this calculator's link model (measured fit of the interconnect, or the given α–β)."""
    if rec is None:
        if req.estimate == "measured":
            raise CalcInputError("estimate", "a measured estimate needs a model (model or model_config)")
        return {}
    arch = arch_from_record(rec, None, "model")
    shipped = shipped_weight_formats(rec.weight_dtype)
    wfmt = shipped.main.name if shipped is not None else "bf16"
    kfmt = kv_fmt.name if kv_fmt is not None and kv_fmt.name in FORMATS else ("fp8" if req.kv_bytes_per_value == 1 else "bf16")
    est = step_estimate(req, lookup, res, arch=arch, hardware_id=req.hardware, phase="decode", batch=req.batch,
                        tokens=1, context_tokens=context, tp=p, weight_format=wfmt, kv_format=kfmt, bound_s=bound_step)
    if not est:
        return {}
    kernels = np.asarray(est["measured_time_s"], dtype=float) - np.asarray(est["measured_parts_s"].get("allreduce", 0.0), dtype=float)
    total = kernels + comm_t
    res.step("measured step", "T_measured = measured kernels (without all-reduce) + t_comm of this link",
             f"{fmt_s(kernels[0])} + {fmt_s(comm_t[0])}", total, "s")
    masked = np.where(fits, total, np.inf)
    best = int(np.argmin(masked)) if np.isfinite(masked).any() else None
    est.update(measured_step_time_s=out(total), measured_to_bound_ratio=out(total / bound_step),
               measured_best={"tp": int(p[best]), "measured_step_time_s": float(total[best])} if best is not None else None)
    est.pop("measured_time_s", None)
    return est


def _at(x, i: int):
    """Point i of a per-candidate array, or the scalar itself."""
    return float(np.asarray(x).reshape(-1)[i]) if np.ndim(x) else x


def _why(tp, mem, comm, step, fits, best_i) -> str:
    if best_i is None:
        return "No candidate fits in device memory; add devices, stages or a smaller format."
    order = sorted(range(len(tp)), key=lambda i: tp[i])
    pos = order.index(best_i)
    b = tp[best_i]
    parts = [f"TP={b} is fastest among the candidates that fit ({fmt_s(step[best_i])})."]
    lower = [i for i in order[:pos] if fits[i] and tp[i] < b]
    higher = [i for i in order[pos + 1:] if fits[i] and tp[i] > b]
    if lower:
        j = lower[-1]
        parts.append(f"From TP={tp[j]} it saves {fmt_s(mem[j] - mem[best_i])} of memory time for "
                     f"{fmt_s(comm[best_i] - comm[j])} more all-reduce time.")
    if higher:
        j = higher[0]
        parts.append(f"Going to TP={tp[j]} would save only {fmt_s(mem[best_i] - mem[j])} of memory time but add "
                     f"{fmt_s(comm[j] - comm[best_i])} of all-reduce time, so the choice stops at TP={b}.")
    elif len(tp) > 1:
        parts.append("It is the largest candidate that fits: each further split still saved more memory time than it added in communication.")
    unfit = sorted({tp[i] for i in range(len(tp)) if not fits[i]})
    if unfit:
        shown = ", ".join(map(str, unfit)) if len(unfit) <= 8 else f"{len(unfit)} candidates ({unfit[0]} … {unfit[-1]})"
        parts.append(f"TP={shown} do not fit in device memory." if len(unfit) <= 8 else f"{shown} do not fit in device memory.")
    return " ".join(parts)


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute(req: ParallelSplitRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    rec = model_record(req, lookup, res, required=False)
    hw = hardware_spec(lookup, req.hardware, "hardware") if req.hardware else None
    if hw is not None:
        note_scope(res, hw)

    def from_model(field: str, explicit, loc: str):
        if explicit is not None:
            return explicit
        if rec is None:
            return None
        v = rec.value(field, loc=loc)
        res.cite(rec.source(field))
        return v

    layers = from_model("layers", req.layers, "layers")
    if layers is None:
        raise CalcInputError("layers", "give layers or a model id")
    hidden = req.hidden_size
    if hidden is None and rec is not None and (req.message_bytes is None or req.pp > 1):
        hidden = from_model("hidden_size", None, "hidden_size")
    # ---- weights
    W = req.weight_bytes
    if W is None:
        if rec is None:
            raise CalcInputError("weight_bytes", "give weight_bytes or a model id")
        params = rec.value("params_total", loc="model")
        res.cite(rec.source("params_total"))
        shipped = shipped_weight_formats(rec.weight_dtype)
        bpp = req.weight_bytes_per_param
        if bpp is None and shipped is not None and not shipped.components:
            bpp = shipped.main.effective_bits / 8
            res.assume(f"Weight format: as published, {shipped.label} ({num(bpp)} B/param); pass weight_bytes_per_param to change it.")
        if bpp is None:  # a mixed published format (MXFP4 experts beside BF16 …): the engine counts it per component
            W = model_weight_bytes(rec, None, res, "weight_bytes_per_param")
        else:
            W = res.step("weight bytes", "W = params × bytes/param", f"{num(params)} × {num(bpp)}", float(params) * bpp, "B")
    W_read = req.weight_read_bytes if req.weight_read_bytes is not None else W
    # ---- KV
    kfmt = None
    KV = req.kv_bytes
    if KV is None:
        if rec is not None and req.context_tokens is not None:
            kfmt = (resolve_format(req.kv_format, "kv_format") if req.kv_format is not None
                    else Fmt(f"{num(req.kv_bytes_per_value)} B/value", 8.0 * req.kv_bytes_per_value))
            per_seq = _kv_from_model(rec, req.context_tokens, kfmt, res)
            KV = res.step("KV bytes", "KV = batch × Σ_groups count × Σ_streams dim × retained(N) × bytes",
                          f"{req.batch} × {fmt_bytes(per_seq)} (N = {num(req.context_tokens)})", per_seq * req.batch, "B")
        else:
            KV = 0.0
            res.assume("No KV given (kv_bytes, or model + context_tokens): KV taken as 0.")
    # ---- hardware
    B_hbm = req.hbm_bandwidth_bytes_per_s
    if B_hbm is None:
        if hw is None:
            raise CalcInputError("hbm_bandwidth_bytes_per_s", "give hbm_bandwidth_bytes_per_s or a hardware id")
        B_hbm = hw.require("memory_bandwidth_bytes_per_s", "hardware")
        hw.cite(res, "memory_bandwidth_bytes_per_s")
    mem_cap = req.memory_bytes
    if mem_cap is None and hw is not None and hw.memory_bytes is not None:
        hw.cite(res, "memory_bytes")
        mem_cap = float(explain_memory_rule(res, hw.memory_bytes, req.memory_utilization, req.runtime_reserve_bytes))
    tp_list = req.tp if isinstance(req.tp, list) else [req.tp]
    alpha, B_link = resolve_link(lookup, res, req.interconnect, req.link_alpha_s, req.link_bandwidth_bytes_per_s,
                                 loc="interconnect", alpha_loc="link_alpha_s", need_alpha=False,
                                 gpus=np.asarray(tp_list), hardware=req.hardware)
    if B_link is None and any(t > 1 for t in tp_list):
        raise CalcInputError("link_bandwidth_bytes_per_s", "give link_bandwidth_bytes_per_s or an interconnect id")
    if alpha is None:
        alpha = 0.0
        if any(t > 1 for t in tp_list):
            if not req.interconnect:
                res.inputs["latency_s"] = {"value": 0.0, "basis": "ASSUMED: no link_alpha_s and no interconnect"}
                res.assume("α NOT GIVEN: no link_alpha_s and no interconnect id, so α = 0 s — communication time is "
                           "a lower bound. Give `link_alpha_s` or an `interconnect` id.")
    step_tokens = req.step_tokens or req.batch
    M = req.message_bytes
    if M is None:
        if hidden is None:
            raise CalcInputError("message_bytes", "give message_bytes, hidden_size or a model id")
        M = res.step("all-reduce message", "M = hidden × step tokens × bytes", f"{num(hidden)} × {num(step_tokens)} × {num(req.activation_bytes)}",
                     float(hidden) * step_tokens * req.activation_bytes, "B")

    # ---- the candidates (one array expression over tp)
    p = broadcast({"tp": tp_list})["tp"]
    n_ar = layers * req.allreduces_per_layer
    mem_t = (W_read + KV) / (p * B_hbm)
    c = collective_cost("all_reduce", "ring", p, M)
    ar_t = c["rounds"] * alpha + (c["wire"] / B_link if B_link is not None else 0.0 * p)
    comm_t = n_ar * ar_t
    comp_t = np.zeros_like(p)
    if req.flops_per_token is not None and req.flop_per_s is not None:
        comp_t = step_tokens * req.flops_per_token / (p * req.flop_per_s)
    # pipeline hand-offs
    pp = req.pp
    hand_t_each, hand_bytes_tok = 0.0, 0.0
    pipeline = None
    if pp > 1:
        if hidden is None:
            raise CalcInputError("hidden_size", "pipeline hand-offs need hidden_size or a model id")
        a_pp, b_pp = resolve_link(lookup, res, req.pp_link, req.pp_link_alpha_s, req.pp_link_bandwidth_bytes_per_s, loc="pp_link",
                                  alpha_loc="pp_link_alpha_s")
        if req.pp_link is None:
            a_pp = _at(alpha, 0) if a_pp is None else a_pp
            b_pp = _at(B_link, 0) if b_pp is None else b_pp
        if b_pp is None:
            raise CalcInputError("pp_link_bandwidth_bytes_per_s", "give the bandwidth between stages (or a TP link)")
        a_pp = a_pp or 0.0
        hand_bytes_tok = req.handoff_tensors * float(hidden) * req.activation_bytes
        hand_bytes = hand_bytes_tok * step_tokens
        hand_t_each = res.step("stage hand-off", "t_h = α_pp + tensors × hidden × bytes × tokens / B_pp",
                               f"{fmt_s(a_pp)} + {fmt_bytes(hand_bytes)} / {fmt_rate(b_pp)}", a_pp + hand_bytes / b_pp, "s")
        pipeline = {"stages": pp, "handoff_bytes_per_token": hand_bytes_tok, "handoff_bytes": hand_bytes,
                    "handoff_time_s": hand_t_each, "handoffs_time_s": (pp - 1) * hand_t_each,
                    "link_tokens_per_s": b_pp / hand_bytes_tok}
    hand_t = (pp - 1) * hand_t_each + 0.0 * p
    local = np.maximum(mem_t, comp_t)
    step = local + comm_t + hand_t
    per_dev = (W + KV) / (p * pp) + req.workspace_bytes
    fits = per_dev <= mem_cap * (1 + 1e-12) if mem_cap is not None else np.ones_like(p, dtype=bool)
    stacked = np.stack([mem_t, comp_t, comm_t, hand_t])
    dominant = np.asarray(TERMS)[np.argmax(stacked, axis=0)]

    # ---- steps (first candidate, plus the ring all-reduce at the first p > 1)
    i0 = 0
    res.step("memory time", "t_mem = (W + KV) / (p × B_hbm)", f"({fmt_bytes(W_read)} + {fmt_bytes(KV)}) / ({int(p[i0])} × {fmt_rate(B_hbm)})",
             mem_t[i0], "s")
    ia = next((i for i, v in enumerate(tp_list) if v > 1), i0)
    res.step(f"ring all-reduce (p = {int(p[ia])})", "t_ar = 2(p−1)α + 2(p−1)/p × M / B_link",
             f"{num(c['rounds'][ia])} × {fmt_s(_at(alpha, ia))} + {fmt_bytes(c['wire'][ia])} / "
             f"{fmt_rate(_at(B_link, ia)) if B_link is not None else '—'}", ar_t[ia], "s")
    res.step(f"communication (p = {int(p[ia])})", "t_comm = layers × all-reduces per layer × t_ar",
             f"{num(layers)} × {req.allreduces_per_layer} × {fmt_s(ar_t[ia])}", comm_t[ia], "s")
    res.step(f"step time (p = {int(p[i0])})", "T = max(t_mem, t_compute) + t_comm" + (" + (pp − 1) × t_h" if pp > 1 else ""),
             f"{fmt_s(local[i0])} + {fmt_s(comm_t[i0])}" + (f" + {pp - 1} × {fmt_s(hand_t_each)}" if pp > 1 else ""), step[i0], "s")

    if fits.any():
        masked = np.where(fits, step, np.inf)
        ties = np.flatnonzero(masked == masked.min())
        best_i = int(ties[np.argmin(p[ties])])
    else:
        best_i = None
    free = (mem_cap - per_dev) if mem_cap is not None else per_dev * np.nan
    cols = {"memory_time_s": out(mem_t), "compute_time_s": out(comp_t), "allreduce_time_s": out(ar_t), "comm_time_s": out(comm_t),
            "handoff_time_s": out(hand_t), "step_time_s": out(step), "per_device_bytes": out(per_dev), "free_bytes": out(free), "fits": fits.tolist(),
            "dominant": dominant.tolist()}
    keys = list(cols)
    candidates = [{"tp": t, "devices": t * pp, **dict(zip(keys, row))} for t, row in zip(tp_list, zip(*cols.values()))]
    if pipeline is not None:
        stage = (local + comm_t) / pp + hand_t_each
        pipeline["stage_time_s"] = out(stage)
        pipeline["tokens_per_s_upper"] = out(step_tokens / stage)
        if req.microbatches:
            m = req.microbatches
            pipeline["bubble_fraction"] = (pp - 1) / (m + pp - 1)
            pipeline["microbatches_time_s"] = out((m + pp - 1) * stage)
            res.step("pipeline bubble", "bubble = (pp − 1) / (m + pp − 1)", f"({pp} − 1) / ({m} + {pp} − 1)", pipeline["bubble_fraction"], "fraction")
    why = _why(tp_list, mem_t.tolist(), comm_t.tolist(), step.tolist(), fits.tolist(), best_i)
    if best_i is not None:
        res.step("best candidate", "argmin T(p) over candidates that fit", f"TP = {tp_list[best_i]}", step[best_i], "s")

    measured = _measured(req, lookup, res, rec, p, step, comm_t, fits, context=req.context_tokens or 0,
                         kv_fmt=kfmt if (rec is not None and req.kv_bytes is None and req.context_tokens is not None) else None)
    if measured:
        for cand, t_m in zip(candidates, measured["measured_step_time_s"]):
            cand["measured_step_time_s"] = t_m
    scalar = not isinstance(req.tp, list)

    def flat(a):
        return out(a[0]) if scalar else out(a)

    res.outputs = {
        "candidates": candidates,
        "best": dict(candidates[best_i]) if best_i is not None else None,
        "why": why,
        "tp": req.tp,
        "memory_time_s": flat(mem_t), "comm_time_s": flat(comm_t), "step_time_s": flat(step),
        "per_device_bytes": flat(per_dev), "free_bytes": flat(free), "fits": flat(fits), "dominant": flat(dominant),
        "weight_bytes": out(W), "kv_bytes": out(KV), "message_bytes": out(M), "allreduces": int(n_ar),
        "pipeline": out(pipeline),
        "what_if": _what_ifs(req, lookup, res, best_i, comm_t.tolist(), mem_t.tolist()),
        **({k: v for k, v in measured.items() if k != "measured_step_time_s"} if measured else {}),
    }
    res.headline = _headline(req, res.outputs)
    res.assume(
        "First-pass decode model: every step reads the weights and KV once, split evenly over the TP ranks; local compute is "
        "below the memory time unless flops_per_token and flop_per_s are given.",
        f"{req.allreduces_per_layer} ring all-reduce(s) of M bytes per layer, serialised after the memory access (no overlap); "
        "no LM-head reduction, kernel efficiency or host launch overhead.",
        "per_device_bytes = (W + KV) / (tp × pp) + workspace: no replication. KV heads fewer than tp ranks, or an MLA latent "
        "cache, are replicated in practice and need more memory.",
    )
    if rec is not None:
        kvh = rec.value("kv_heads", required=False)
        bad = [t for t in tp_list if kvh and t > 1 and (kvh % t and t % kvh)]
        if kvh and any(t > kvh for t in tp_list):
            res.assume(f"{req.model} has {int(kvh)} KV heads: at tp > {int(kvh)} the KV is replicated, not split.")
        if bad:
            res.assume(f"tp = {', '.join(map(str, bad))} does not divide the {int(kvh)} KV heads evenly.")
        if str(rec.kind) == "moe" and req.weight_read_bytes is None:
            res.assume("MoE model: all weights are counted as read per step; give weight_read_bytes for the experts a step touches.")
    if pp > 1:
        res.assume("Pipeline stages run one after another for a token: the memory time is not cut by pp, (pp − 1) hand-offs are added; "
                   "stages are balanced. Throughput with microbatches is bounded by one stage's time.")
    return res


def _headline(req: ParallelSplitRequest, o: dict) -> str:
    best = o["best"]
    cands = o["candidates"]
    pp = f" × PP={req.pp}" if req.pp > 1 else ""
    if best is None:
        return H.sentence(f"None of the {H.plural(len(cands), 'candidate')} fits in device memory at PP={req.pp}: add devices, "
                          "stages or a smaller format")
    n_fit = sum(1 for c in cands if c["fits"])
    s = (f"Choose TP={best['tp']}{pp}: a {H.fmt_seconds(best['step_time_s'])} decode step (memory "
         f"{H.fmt_seconds(best['memory_time_s'])}, all-reduce {H.fmt_seconds(best['comm_time_s'])}), the fastest of "
         f"{H.plural(n_fit, 'candidate')} that fit")
    higher = sorted((c for c in cands if c["fits"] and c["tp"] > best["tp"]), key=lambda c: c["tp"])
    if higher:
        j = higher[0]
        saved = (best["memory_time_s"] or 0) - (j["memory_time_s"] or 0)
        added = (j["comm_time_s"] or 0) - (best["comm_time_s"] or 0)
        s += (f"; TP={j['tp']} would save {H.fmt_seconds(saved)} of memory time but add {H.fmt_seconds(added)} of "
              "all-reduce time")
    elif n_fit > 1:
        s += "; it is the largest that fits, and each further split still saved more memory time than it added in all-reduces"
    unfit = [c["tp"] for c in cands if not c["fits"]]
    if unfit:
        s += f"; TP={', '.join(map(str, unfit[:6]))}{' …' if len(unfit) > 6 else ''} {'does' if len(unfit) == 1 else 'do'} not fit"
    return H.sentence(s)


LINK_FIELDS = ("link_alpha_s", "link_bandwidth_bytes_per_s")
HW_FIELDS = ("hbm_bandwidth_bytes_per_s", "memory_bytes")


def _moved(tp: list[int], base_i, var_best, base_comm, base_mem, var_comm, var_mem) -> str:
    """One sentence on how the variant's choice differs from the base's."""
    if base_i is None or var_best is None:
        return "No comparison: in one of the two settings no candidate fits."
    b0, b1 = tp[base_i], var_best["tp"]
    if b0 == b1:
        return f"The best candidate stays at TP={b0}."
    j = base_i
    num_ = (lambda v: float("inf") if v is None else float(v))  # null (infinite) times compare as inf
    var_comm, var_mem = [num_(v) for v in var_comm], [num_(v) for v in var_mem]
    with np.errstate(invalid="ignore"):
        dc, dm = np.float64(var_comm[j]) - base_comm[j], np.float64(var_mem[j]) - base_mem[j]
    cause = (f"at TP={b0} the all-reduces now take {fmt_s(var_comm[j])} instead of {fmt_s(base_comm[j])}" if not abs(dc) < abs(dm)
             else f"at TP={b0} the memory time is now {fmt_s(var_mem[j])} instead of {fmt_s(base_mem[j])}")
    return f"The best candidate moves from TP={b0} to TP={b1}: {cause}."


def _what_ifs(req: ParallelSplitRequest, lookup: Lookup, res: Result, base_i, base_comm, base_mem) -> list[dict]:
    variants = []
    base = req.model_dump(exclude={"what_if"}, exclude_none=True)
    for i, w in enumerate(req.what_if):
        patch = w.model_dump(exclude_unset=True, exclude_none=True, exclude={"label"})
        merged = dict(base)
        if "interconnect" in patch:  # a new link replaces explicit link numbers the variant does not restate
            for k in LINK_FIELDS:
                merged.pop(k, None)
        if "hardware" in patch:
            for k in HW_FIELDS:
                merged.pop(k, None)
        merged.update(patch)
        try:
            sub_req = ParallelSplitRequest.model_validate(merged)
            sub = compute(sub_req, lookup)
        except CalcInputError as e:
            raise CalcInputError(("what_if", i) + e.loc, e.message) from None
        except ValidationError as e:  # a combination the base request model refuses
            err = e.errors()[0]
            raise CalcInputError(("what_if", i) + tuple(err.get("loc", ())), err.get("msg", "invalid variant")) from None
        for src in sub.sources:
            res.cite(src)
        o = sub.outputs
        label = w.label or ", ".join(f"{k}={v}" for k, v in patch.items()) or f"variant {i + 1}"
        best = o["best"]
        tp_list = req.tp if isinstance(req.tp, list) else [req.tp]
        as_list = (lambda v: jsonable(v) if isinstance(v, (list, np.ndarray)) else [v])   # a sweep's outputs are arrays
        variants.append({"label": label, "step_time_s": o["step_time_s"], "memory_time_s": o["memory_time_s"],
                         "comm_time_s": o["comm_time_s"], "fits": o["fits"], "best": best, "why": o["why"],
                         "moved": _moved(tp_list, base_i, best, base_comm, base_mem, as_list(o["comm_time_s"]), as_list(o["memory_time_s"]))})
        res.step(f"what-if: {label}", "same T(p) with the replaced inputs; best = argmin over candidates that fit",
                 f"best TP = {best['tp'] if best else '—'}", best["step_time_s"] if best else None, "s")
    return variants


CALCULATORS = [
    Calculator(
        name="parallel-split",
        profile=Profile(3.8e-06, 2118, 475),
        mcp_tool=True,
        family="parallel_split",
        families=("network",),
        title="Tensor-parallel degree (and pipeline stages) for a decode step",
        summary="Step time of each TP candidate as memory time (W + KV)/(p·B_hbm) plus per-layer ring all-reduces, whether "
                "it fits in device memory, which term dominates, the best candidate, and why the choice moves with the link.",
        description="T(p) = (W+KV)/(p·B_hbm) + n_ar·[2(p−1)α + 2(p−1)M/(p·B_link)], n_ar = layers × all-reduces per layer; "
                    "per_device_bytes = (W+KV)/(p·pp) + workspace; best = lowest T among candidates that fit. With pp > 1, "
                    "(pp−1) stage hand-offs of tensors × hidden × bytes × tokens are added and the bubble is (pp−1)/(m+pp−1). "
                    "A first-pass decode model: no overlap, no replication, no kernel efficiency.",
        request_model=ParallelSplitRequest,
        outputs_model=ParallelSplitOutputs,
        compute=compute,
        example={"weight_bytes": 16.4e9, "kv_bytes": 1207959552, "layers": 36, "hidden_size": 4096,
                 "hbm_bandwidth_bytes_per_s": 2e12, "memory_bytes": 80e9, "link_alpha_s": 5e-6,
                 "link_bandwidth_bytes_per_s": 25e9, "tp": [1, 2, 4, 8]},
        extra_examples=({"model": "qwen3-8b", "context_tokens": 8192, "hbm_bandwidth_bytes_per_s": 2e12,
                         "link_alpha_s": 1e-6, "link_bandwidth_bytes_per_s": 200e9, "tp": [1, 2, 4, 8]},
                        {"model": "llama-3.1-70b", "hardware": "h100-sxm", "interconnect": "nvlink4", "context_tokens": 8192,
                         "batch": 8, "tp": [1, 2, 4, 8], "pp": 2, "microbatches": 4,
                         "what_if": [{"label": "PCIe-class link", "link_alpha_s": 1e-5, "link_bandwidth_bytes_per_s": 25e9}]}),
        cases=("model-parallelism", "model-resource-accounting", "communication-tuning", "collective-paths-and-diagnosis"),
        sweepable=("tp",),
        chart=Chart(x="tp", y=("memory_time_s", "comm_time_s", "step_time_s", "what_if.*.step_time_s"),
                    x_label="tensor-parallel degree (devices per stage)", y_label="time per decode step", y_unit="s",
                    x_scale="linear", fits="fits", marker="best.tp", marker_label="best TP"),
    ),


]
