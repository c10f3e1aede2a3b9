"""`parallel-split`: choosing a tensor-parallel degree (and pipeline stages) for a decode step.

Two step models (`step_model`). The layer-by-layer one (`layers`, the default when the model's layers and the
device's peak rates are known) lists what one rank of each TP degree runs in a decode step with the step model of
`calculators.perf` (projections, attention over its window, FFN or the experts the batch touches, LM head) and
bounds it by max(ΣF/peak, ΣB/B_hbm), plus the all-reduces over the TP link; the measured estimate looks the same
operations up in measured kernel tables. The book's first-pass decode model (`first_pass`, case `model-parallelism`):
T(p) = (W + KV)/(p·B_hbm) + n_ar·[2(p−1)α + 2(p−1)M/(p·B_link)], n_ar = layers × all-reduces per layer. Splitting further
divides the bytes each device reads but adds all-reduce rounds, so the best p moves with the interconnect. Optional
pipeline stages add activation hand-offs and a bubble. With `devices: N`, every TP degree t dividing N runs N/t
replicas, ranked by output tokens/s per device.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, ValidationError

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, fmt_bytes, fmt_rate, fmt_s, Fraction, jsonable, Lookup,
    NonNegFloat, num, out, PosFloat, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.domain import (
    arch_from_record, explain_memory_rule, FORMAT_HELP, FormatField, format_label, groups_from_model, hardware_spec,
    MODEL_CONFIG_FIELD, model_record, note_scope, resolve_format,
)
from calculators.perf import Estimate, ESTIMATE_FIELD, resolve_link, step_estimate
from calculators.framework import headline as H
from calculators.families.serving._parallel_split_inputs import (
    assumptions, candidates_of, first_pass_inputs, own_link_of, pipeline_link, step_model_of, steps, tp_link,
)
from calculators.families.serving._parallel_split_model import FirstPass, Layers, rank_options, weight_formats
from calculators.families.serving._parallel_split_outputs import ParallelSplitOutputs

TERMS = ("memory", "compute", "communication", "handoff")
MAX_DEVICES = 1_000_000


class ParallelSplitRequest(CalcRequest):
    """A decode step split over `tp` devices per stage (candidates) and `pp` pipeline stages."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id: weights (params × format), layers, hidden size, KV shape.", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    estimate: Estimate | None = ESTIMATE_FIELD
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: memory, bandwidth, peak rates and its scale-up link.", examples=["h100-sxm"])
    link: str | None = Field(None, min_length=1, max_length=100, description="Link id between the TP ranks: one-way bandwidth and latency. "
                             "Default: the hardware's scale-up link (the first link its record lists).", examples=["nvlink4"])
    devices: Annotated[int, Field(ge=1, le=MAX_DEVICES)] | None = Field(None, description="Devices in total N: every TP degree t dividing N/pp "
                                                                          "(that the model's heads allow) runs N/(t·pp) replicas, ranked by output tokens/s per device.", examples=[8])
    step_model: Literal["layers", "first_pass"] | None = Field(None, description="layers: the step model of the model's layer layout "
                                                               "(needs a model and a device's peak rates); first_pass: the book's (W + KV)/(p·B_hbm) + all-reduces. "
                                                               "Default: layers when possible and no first-pass-only input is given.")
    weight_format: FormatField | None = Field(None, description="Storage format of the weights. Default: the model's published format (per "
                                              "component for mixed checkpoints). " + FORMAT_HELP)
    weight_bytes: NonNegFloat | None = Field(None, description="Weight bytes W of the whole model (overrides the model; first pass).", examples=[16.4e9])
    weight_bytes_per_param: Annotated[float, Field(gt=0, le=16, allow_inf_nan=False)] | None = Field(None, description="Bytes per parameter when W comes from a model (first pass; weight_format is the general form).")
    weight_read_bytes: NonNegFloat | None = Field(None, description="Weight bytes read per step if not all of W (first pass). Default W.")
    kv_bytes: NonNegFloat | None = Field(None, description="KV/state bytes of the whole batch (first pass; overrides model × context_tokens × batch). Default 0.",
                                         examples=[1207959552])
    kv_bytes_per_value: Annotated[float, Field(gt=0, le=16, allow_inf_nan=False)] = Field(2.0, description="Bytes per cached value when KV comes from the model (first pass; BF16 = 2).")
    layers: Annotated[int, Field(ge=1, le=100_000)] | None = Field(None, description="Layers (first pass; overrides the model).", examples=[36])
    hidden_size: Annotated[int, Field(ge=1, le=10**7)] | None = Field(None, description="Hidden size (first pass; overrides the model); sets message and hand-off bytes.")
    memory_bandwidth_bytes_per_s: PosFloat | None = Field(None, description="Effective memory bandwidth per device, bytes/s (overrides hardware).", examples=[2e12])
    memory_per_device_bytes: PosFloat | None = Field(None, description="Usable memory per device, bytes (overrides hardware, taken as given). "
                                                     "Without it or hardware every candidate fits.")
    memory_utilization: Fraction | None = Field(None, description="With `hardware`: fraction of capacity usable (default 0.9, vLLM's gpu_memory_utilization).")
    runtime_reserve_bytes: NonNegFloat | None = Field(None, description="With `hardware`: bytes reserved per device on top (default 0).")
    kv_format: FormatField | None = Field(None, description="Cache format when KV comes from the model (default bf16; overrides kv_bytes_per_value). " + FORMAT_HELP)
    link_alpha_s: NonNegFloat | None = Field(None, description="α of the TP link per dependent round, seconds (overrides the link).", examples=[1e-6])
    link_bandwidth_bytes_per_s: PosFloat | None = Field(None, description="One-way TP link bandwidth per rank, bytes/s (overrides the link).", examples=[200e9])
    allreduces_per_layer: Annotated[int, Field(ge=0, le=1000)] = Field(2, description="All-reduces per layer (first pass; attention + MLP = 2).")
    message_bytes: NonNegFloat | None = Field(None, description="Bytes M of each all-reduce (first pass). Default hidden × step_tokens × activation_bytes.", examples=[8192])
    activation_bytes: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)] = Field(2.0, description="Bytes per activation value (first pass; BF16 = 2).")
    tp: PosIntSweep | None = Field(None, description="Tensor-parallel candidates p (a list is the sweep; outputs follow its order). "
                                   "Default with `devices`: every valid divisor of devices/pp.", examples=[[1, 2, 4, 8]])
    pp: Annotated[int, Field(ge=1, le=10_000)] = Field(1, description="Pipeline stages; each holds layers/pp of the model.")
    batch: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="Sequences in the step (decode: one new token each); with "
                                                          "`devices` and no batch, each option runs the largest batch that fits.")
    context_tokens: Annotated[int, Field(ge=0, le=10**9)] | None = Field(None, description="Tokens of history per sequence (sizes the KV from the model).", examples=[8192])
    step_tokens: Annotated[int, Field(ge=1, le=10**9)] | None = Field(None, description="Tokens processed in the step (first pass; default batch; a prefill chunk for prefill).")
    workspace_bytes: NonNegFloat = Field(0.0, description="Extra bytes per device (activations, workspace, runtime).")
    flops_per_token: NonNegFloat | None = Field(None, description="FLOPs per token of the whole model (first pass; ≈ 2 × active params); with peak_flop_per_s adds a compute time.")
    peak_flop_per_s: PosFloat | None = Field(None, description="Effective FLOP/s per device (overrides the hardware's peak rows, for every precision).")
    pp_link: str | None = Field(None, min_length=1, max_length=100, description="Link id between pipeline stages (default: the TP link).")
    pp_link_alpha_s: NonNegFloat | None = Field(None, description="α of a stage hand-off, seconds (default: the TP link's α).")
    pp_link_bandwidth_bytes_per_s: PosFloat | None = Field(None, description="One-way bandwidth between stages, bytes/s (default: the TP link).")
    handoff_tensors: Annotated[int, Field(ge=1, le=16)] = Field(1, description="Tensors of [tokens, hidden] handed to the next stage (hidden_states + residual = 2).")
    microbatches: Annotated[int, Field(ge=1, le=10**6)] | None = Field(None, description="Microbatches in flight through the pipeline (gives the bubble fraction).")
    what_if: list[SplitWhatIf] = Field(default_factory=list, max_length=20, description="Variants (another link, device, batch) "
                                       "recomputed over the same candidates; each reports its step times and best tp.")


class SplitWhatIf(CalcRequest):
    """A partial request: the fields given replace the base request's (e.g. a slower link)."""

    label: str | None = Field(None, max_length=200, description="Name shown for this variant.")
    link: str | None = Field(None, min_length=1, max_length=100)
    link_alpha_s: NonNegFloat | None = None
    link_bandwidth_bytes_per_s: PosFloat | None = None
    hardware: str | None = Field(None, min_length=1, max_length=100)
    memory_bandwidth_bytes_per_s: PosFloat | None = None
    memory_per_device_bytes: PosFloat | None = None
    weight_format: FormatField | None = None
    kv_bytes: NonNegFloat | None = None
    batch: Annotated[int, Field(ge=1, le=10**9)] | None = Field(None)
    context_tokens: Annotated[int, Field(ge=0, le=10**9)] | None = Field(None)
    step_tokens: Annotated[int, Field(ge=1, le=10**9)] | None = Field(None)
    message_bytes: NonNegFloat | None = None
    allreduces_per_layer: Annotated[int, Field(ge=0, le=1000)] | None = Field(None)
    pp: Annotated[int, Field(ge=1, le=10_000)] | None = Field(None)
    workspace_bytes: NonNegFloat | None = None


# --------------------------------------------------------------------------- the measured estimate

def _measured(req, lookup: Lookup, res: Result, rec, p, b, bound_step, comm_t, hand_t, fits, kv_label: str,
              own_link: bool) -> dict:
    """Per-candidate measured step times: the measured kernels of the hardware's system with the link's α–β
    all-reduces (`own_link` is kept for the caller's wording only)."""
    if rec is None:
        if req.estimate == "measured":
            raise CalcInputError("estimate", "a measured estimate needs a model (model or model_config)")
        return {}
    try:
        arch = arch_from_record(rec, None, "model")
    except CalcInputError:
        arch = None
    est = step_estimate(req, lookup, res, arch=arch, hardware_id=req.hardware, phase="decode", batch=b, tokens=1,
                        context_tokens=req.context_tokens or 0, tp=p, weight_format=req.weight_format or "bf16",
                        kv_format=kv_label, bound_s=bound_step)
    if not est:
        return {}
    total = np.asarray(est.pop("measured_time_s"), dtype=float) + 0.0 * p
    # one communication rule for every calculator (perf.step_time): the measured kernels without the system's own
    # all-reduce table + the collectives over the link by its α–β fit, so both estimates carry the same t_comm
    kernels = total - np.asarray(est["measured_parts_s"].get("allreduce", 0.0), dtype=float)
    total = kernels + comm_t + hand_t
    res.step("measured step", "T_measured = measured kernels (without all-reduce) + t_comm of this link + hand-offs",
             f"{fmt_s(kernels[0])} + {fmt_s(comm_t[0])} + {fmt_s(hand_t[0])}", total, "s")
    masked = np.where(fits, total, np.inf)
    best = int(np.argmin(masked)) if np.isfinite(masked).any() else None
    est.update(measured_step_time_s=total, measured_to_bound_ratio=out(total / bound_step),
               measured_best={"tp": int(p[best]), "measured_step_time_s": float(total[best])} if best is not None else None)
    return est


# --------------------------------------------------------------------------- compute

@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute(req: ParallelSplitRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    rec = model_record(req, lookup, res, required=False)
    hw = hardware_spec(lookup, req.hardware, "hardware") if req.hardware else None
    if hw is not None:
        note_scope(res, hw)
    mode, lay, rates, why_mode = step_model_of(req, rec, hw)
    if req.weight_format is not None and req.weight_bytes_per_param is not None:
        raise CalcInputError("weight_format", "give weight_format or weight_bytes_per_param, not both")
    B_hbm = req.memory_bandwidth_bytes_per_s
    if B_hbm is None:
        if hw is None:
            raise CalcInputError("memory_bandwidth_bytes_per_s", "give memory_bandwidth_bytes_per_s or a hardware id")
        B_hbm = hw.require("memory_bandwidth_bytes_per_s", "hardware")
        hw.cite(res, "memory_bandwidth_bytes_per_s")
    mem_cap = req.memory_per_device_bytes
    if mem_cap is None and hw is not None and hw.memory_bytes is not None:
        hw.cite(res, "memory_bytes")
        mem_cap = float(explain_memory_rule(res, hw.memory_bytes, req.memory_utilization, req.runtime_reserve_bytes))
    tp_list, dropped = candidates_of(req, lay)
    need_link = any(t > 1 for t in tp_list) or (req.pp > 1 and req.pp_link is None and req.pp_link_bandwidth_bytes_per_s is None)
    link_id = tp_link(req, hw, res, need_link)
    alpha, B_link = resolve_link(lookup, res, link_id, req.link_alpha_s, req.link_bandwidth_bytes_per_s,
                                 loc="link", alpha_loc="link_alpha_s", need_alpha=False,
                                 gpus=np.asarray(tp_list), hardware=req.hardware)
    if B_link is None and any(t > 1 for t in tp_list):
        raise CalcInputError("link_bandwidth_bytes_per_s", "give link_bandwidth_bytes_per_s or a link id")
    if alpha is None:
        alpha = 0.0
        if any(t > 1 for t in tp_list) and not link_id:
            res.inputs["latency_s"] = {"value": 0.0, "basis": "ASSUMED: no link_alpha_s and no link"}
            res.assume("α NOT GIVEN: no link_alpha_s and no link id, so α = 0 s — communication time is "
                       "a lower bound. Give `link_alpha_s` or a `link` id.")
    own_link = own_link_of(lookup, req.hardware, link_id) and req.link_alpha_s is None and req.link_bandwidth_bytes_per_s is None

    # ---- the model of the step
    if mode == "layers":
        wf, wlabel = weight_formats(rec, req.weight_format)
        kf = resolve_format(req.kv_format, "kv_format")
        kv_label, hidden, act = format_label(req.kv_format or "bf16"), float(lay.d), 2.0
        if req.context_tokens is None:
            res.assume("No context_tokens: the KV cache is sized and read at 0 tokens of history.")
    else:
        fp = first_pass_inputs(req, res, rec)
        wlabel, kv_label, hidden, act = fp["wlabel"], fp["kv_label"], fp["hidden"], req.activation_bytes
    handoff, hand_bytes_tok, a_pp, b_pp = pipeline_link(req, lookup, res, hidden, act, alpha, B_link)
    if mode == "layers":
        model = Layers(lay, groups_from_model(rec, res, "model"), rates, wf, kf, req.context_tokens or 0, req.pp,
                       req.workspace_bytes, handoff)
    else:
        if fp["hidden"] is None and req.message_bytes is None:
            raise CalcInputError("message_bytes", "give message_bytes, hidden_size or a model id")
        model = FirstPass(fp["W"], fp["W_read"], fp["KV"] / req.batch, fp["layers"], fp["hidden"], req.allreduces_per_layer,
                          req.message_bytes, req.activation_bytes, req.step_tokens, req.flops_per_token, req.peak_flop_per_s,
                          B_hbm, req.pp, req.workspace_bytes, handoff)
    tot = model.totals(req.batch)
    step_tokens = req.step_tokens or req.batch
    if mode == "first_pass" and req.message_bytes is None:
        res.step("all-reduce message", "M = hidden × step tokens × bytes", f"{num(hidden)} × {num(step_tokens)} × {num(act)}",
                 tot["message_bytes"], "B")

    # ---- the candidates (one array expression over tp in the first pass; one op list per TP degree in layers)
    p = broadcast({"tp": tp_list})["tp"]
    t = model.times(p, float(req.batch), alpha, B_link)
    mem_t, comp_t, ar_t, comm_t, hand_t, step, per_dev = (t[k] for k in ("mem_t", "comp_t", "ar_t", "comm_t", "hand_t", "step", "per_dev"))
    fits = per_dev <= mem_cap * (1 + 1e-12) if mem_cap is not None else np.ones_like(p, dtype=bool)
    dominant = np.asarray(TERMS)[np.argmax(np.stack([mem_t, comp_t, comm_t, hand_t]), axis=0)]
    pipeline = None
    if req.pp > 1:
        hand_each = float(handoff(step_tokens))
        res.step("stage hand-off", "t_h = α_pp + tensors × hidden × bytes × tokens / B_pp",
                 f"{fmt_s(a_pp)} + {fmt_bytes(hand_bytes_tok * step_tokens)} / {fmt_rate(b_pp)}", hand_each, "s")
        pipeline = {"stages": req.pp, "handoff_bytes_per_token": hand_bytes_tok, "handoff_bytes": hand_bytes_tok * step_tokens,
                    "handoff_time_s": hand_each, "handoffs_time_s": (req.pp - 1) * hand_each,
                    "link_tokens_per_s": b_pp / hand_bytes_tok}
    steps(res, mode, model, t, tp_list, B_hbm, alpha, B_link, tot, req)
    if fits.any():
        masked = np.where(fits, step, np.inf)
        ties = np.flatnonzero(masked == masked.min())
        best_i = int(ties[np.argmin(p[ties])])
    else:
        best_i = None
    free = (mem_cap - per_dev) if mem_cap is not None else per_dev * np.nan
    cols = {"memory_time_s": out(mem_t), "compute_time_s": out(comp_t), "allreduce_time_s": out(ar_t), "comm_time_s": out(comm_t),
            "handoff_time_s": out(hand_t), "step_time_s": out(step), "per_device_bytes": out(per_dev), "free_bytes": out(free),
            "fits": fits.tolist(), "dominant": dominant.tolist()}
    keys = list(cols)
    candidates = [{"tp": tp_, "devices": tp_ * req.pp, **dict(zip(keys, row))} for tp_, row in zip(tp_list, zip(*cols.values()))]
    if pipeline is not None:
        stage = (np.maximum(mem_t, comp_t) + comm_t) / req.pp + pipeline["handoff_time_s"]
        pipeline["stage_time_s"] = out(stage)
        pipeline["tokens_per_s_upper"] = out(step_tokens / stage)
        if req.microbatches:
            m, pp = req.microbatches, req.pp
            pipeline["bubble_fraction"] = (pp - 1) / (m + pp - 1)
            pipeline["microbatches_time_s"] = out((m + pp - 1) * stage)
            res.step("pipeline bubble", "bubble = (pp − 1) / (m + pp − 1)", f"({pp} − 1) / ({m} + {pp} − 1)", pipeline["bubble_fraction"], "fraction")
    why = _why(tp_list, mem_t.tolist(), comm_t.tolist(), step.tolist(), fits.tolist(), best_i)
    if best_i is not None:
        res.step("best candidate", "argmin T(p) over candidates that fit", f"TP = {tp_list[best_i]}", step[best_i], "s")

    b_arr = np.full(p.shape, float(req.batch))
    measured = _measured(req, lookup, res, rec, p, b_arr, step, comm_t, hand_t, fits, kv_label, own_link)
    if measured:
        for cand, t_m in zip(candidates, measured["measured_step_time_s"]):
            cand["measured_step_time_s"] = float(t_m)
    devices = None
    if req.devices is not None:
        devices = _devices(req, lookup, res, rec, model, tp_list, dropped, alpha, B_link, mem_cap, t, measured, kv_label, own_link)
    scalar = not isinstance(req.tp, list) and req.devices is None

    def flat(a):
        return out(a[0]) if scalar else out(a)

    res.outputs = {
        "step_model": mode, "weight_format": wlabel, "link": link_id,
        "candidates": candidates,
        "best": dict(candidates[best_i]) if best_i is not None else None,
        "why": why,
        "tp": tp_list[0] if scalar else tp_list,
        "memory_time_s": flat(mem_t), "comm_time_s": flat(comm_t), "step_time_s": flat(step),
        "per_device_bytes": flat(per_dev), "free_bytes": flat(free), "fits": flat(fits), "dominant": flat(dominant),
        "weight_bytes": out(tot["weight_bytes"]), "kv_bytes": out(tot["kv_bytes"]), "message_bytes": out(tot["message_bytes"]),
        "allreduces": tot["allreduces"],
        "pipeline": out(pipeline),
        "what_if": _what_ifs(req, lookup, res, tp_list, best_i, comm_t.tolist(), mem_t.tolist()),
        "devices": devices,
        **({k: v for k, v in measured.items() if k != "measured_step_time_s"} if measured else {}),
    }
    res.headline = _headline(req, res.outputs)
    assumptions(req, res, rec, mode, why_mode, tp_list)
    return res


def _devices(req, lookup: Lookup, res: Result, rec, model, tp_list, dropped, alpha, B_link, mem_cap, t0: dict, m0: dict,
             kv_label: str, own_link: bool) -> dict:
    """TP × replicas on `devices` devices, each option at the given batch or the largest that fits, ranked by output
    tokens/s per device."""
    p = np.asarray(tp_list, dtype=float)
    given = "batch" in req.model_fields_set
    if given:
        b, t = np.full(p.shape, float(req.batch)), t0
        meas = np.asarray(m0["measured_step_time_s"], dtype=float) if m0 else None
    else:
        if mem_cap is None:
            raise CalcInputError("batch", "give batch, or hardware or memory_per_device_bytes so that the largest batch that fits "
                                          "can be found")
        b = model.max_batch(p, mem_cap)
        if not np.all(np.isfinite(b)):
            raise CalcInputError("context_tokens", "the largest batch that fits needs the KV of a sequence: give context_tokens "
                                                   "(or batch)")
        b = np.clip(b, 0, 10**9)
        t = model.times(p, np.maximum(b, 1.0), alpha, B_link)
        scratch = Result(inputs={}, outputs={})
        m = _measured(req, lookup, scratch, rec, p, np.maximum(b, 1.0), t["step"], t["comm_t"], t["hand_t"],
                      np.ones(p.shape, dtype=bool), kv_label, own_link)
        for src in scratch.sources:
            res.cite(src)
        meas = np.asarray(m["measured_step_time_s"], dtype=float) if m else None
    fits = t["per_dev"] <= mem_cap * (1 + 1e-12) if mem_cap is not None else np.ones(p.shape, dtype=bool)
    options = rank_options(tp_list, req.pp, req.devices, b, t["step"], meas, t["per_dev"], fits)
    best = next((o for o in options if o["rank"] == 1), None)
    ranked = "measured" if meas is not None else "bound"
    if best is not None:
        timed = best["measured_step_time_s"] if meas is not None else best["step_time_s"]
        res.step(f"output tokens/s per device (TP = {best['tp']} × {best['replicas']} replicas)", "batch / step time / (tp × pp)",
                 f"{best['batch']} / {fmt_s(timed)} / {best['tp'] * req.pp}", best["tokens_per_s_per_device"], "tokens/s")
    res.assume(f"{req.devices} devices: each TP degree t runs {req.devices}/(t × {req.pp}) independent replicas; options are ranked "
               f"by output tokens/s per device = batch / {ranked} step time / (tp × pp), one decode token per sequence per step "
               "(pipeline stages not overlapped by microbatches).")
    if not given:
        res.assume("No batch given: each option runs the largest batch that fits its memory per device (weights + batch × KV at "
                   "context_tokens + workspace ≤ usable memory), with no engine cap on sequences (such as max_num_seqs).")
    if dropped:
        res.assume("Left out: " + "; ".join(f"TP={d['tp']} ({d['why']})" for d in dropped[:6]) + ".")
    return {"devices": req.devices, "batch_basis": "given" if given else "largest that fits", "ranked_by": ranked,
            "options": options, "best": best, "dropped": dropped}


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


def _devices_headline(req: ParallelSplitRequest, d: dict) -> str:
    best = d["best"]
    if best is None:
        return H.sentence(f"No TP degree fits the model on {H.plural(req.devices, 'device')}: add devices or use a smaller format")
    basis = "the largest that fits" if d["batch_basis"] != "given" else "as given"
    s = (f"On {H.plural(req.devices, 'device')}, run TP={best['tp']}{f' × PP={req.pp}' if req.pp > 1 else ''} × "
         f"{H.plural(best['replicas'], 'replica')} at batch {H.fmt_count(best['batch'])} per replica ({basis}): "
         f"{H.fmt_num(best['tokens_per_s_per_device'])} output tokens/s per device ({d['ranked_by']} step time)")
    others = [o for o in d["options"] if o["fits"] and o is not best][:2]
    if others:
        s += ", ahead of " + " and ".join(f"TP={o['tp']} ({H.fmt_num(o['tokens_per_s_per_device'])} at batch "
                                          f"{H.fmt_count(o['batch'])})" for o in others)
    return H.sentence(s)


def _headline(req: ParallelSplitRequest, o: dict) -> str:
    if o.get("devices") is not None:
        return _devices_headline(req, o["devices"])
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
HW_FIELDS = ("memory_bandwidth_bytes_per_s", "memory_per_device_bytes")


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


def _what_ifs(req: ParallelSplitRequest, lookup: Lookup, res: Result, tp_list, base_i, base_comm, base_mem) -> list[dict]:
    variants = []
    # the fields the request set (defaults stay defaults, so a variant chooses its step model as the base did); a
    # variant recomputes the same candidates, without the devices ranking
    base = req.model_dump(exclude={"what_if", "devices"}, exclude_unset=True, exclude_none=True)
    base["tp"] = list(tp_list) if isinstance(req.tp, list) or req.tp is None else req.tp
    for i, w in enumerate(req.what_if):
        patch = w.model_dump(exclude_unset=True, exclude_none=True, exclude={"label"})
        merged = dict(base)
        if "link" in patch:  # a new link replaces explicit link numbers the variant does not restate
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
        summary="Step time of each TP candidate (layer by layer from the model's layout and the device's peak rates, or the "
                "book's first pass (W + KV)/(p·B_hbm)) plus per-layer ring all-reduces over the TP link (the hardware's "
                "scale-up link by default), whether it fits, which term dominates, the best candidate and why the choice moves "
                "with the link; with devices, TP × replicas ranked by output tokens/s per device.",
        description="layers (default with a model and a device): the step model's operations of one rank per TP degree in the "
                    "weight and KV formats, bound max(ΣF/peak, ΣB/B_hbm), plus 2 ring all-reduces per layer over the link, and "
                    "the measured estimate of the same operations where measured kernels exist. first_pass (the book's): "
                    "T(p) = (W+KV)/(p·B_hbm) + n_ar·[2(p−1)α + 2(p−1)M/(p·B_link)], n_ar = layers × all-reduces per layer; "
                    "per_device_bytes = (W+KV)/(p·pp) + workspace. best = lowest T among candidates that fit. With pp > 1, "
                    "(pp−1) stage hand-offs of tensors × hidden × bytes × tokens are added and the bubble is (pp−1)/(m+pp−1). "
                    "With devices = N: each valid t dividing N/pp runs N/(t·pp) replicas at the given batch or the largest that "
                    "fits, ranked by batch / step time / (t·pp). No kernel overlap with communication, no expert parallelism.",
        request_model=ParallelSplitRequest,
        outputs_model=ParallelSplitOutputs,
        compute=compute,
        example={"weight_bytes": 16.4e9, "kv_bytes": 1207959552, "layers": 36, "hidden_size": 4096,
                 "memory_bandwidth_bytes_per_s": 2e12, "memory_per_device_bytes": 80e9, "link_alpha_s": 5e-6,
                 "link_bandwidth_bytes_per_s": 25e9, "tp": [1, 2, 4, 8]},
        extra_examples=({"model": "qwen3-8b", "context_tokens": 8192, "memory_bandwidth_bytes_per_s": 2e12,
                         "link_alpha_s": 1e-6, "link_bandwidth_bytes_per_s": 200e9, "tp": [1, 2, 4, 8]},
                        {"model": "llama-3.1-70b", "hardware": "h100-sxm", "link": "nvlink4", "context_tokens": 8192,
                         "batch": 8, "tp": [1, 2, 4, 8], "pp": 2, "microbatches": 4,
                         "what_if": [{"label": "PCIe-class link", "link_alpha_s": 1e-5, "link_bandwidth_bytes_per_s": 25e9}]},
                        {"model": "llama-3.1-70b", "hardware": "h100-sxm", "devices": 8, "context_tokens": 2048,
                         "weight_format": "fp8"}),
        cases=("model-parallelism", "model-resource-accounting", "communication-tuning", "collective-paths-and-diagnosis"),
        sweepable=("tp",),
        chart=Chart(x="tp", y=("memory_time_s", "comm_time_s", "step_time_s", "what_if.*.step_time_s"),
                    x_label="tensor-parallel degree (devices per stage)", y_label="time per decode step", y_unit="s",
                    x_scale="linear", fits="fits", marker="best.tp", marker_label="best TP"),
    ),


]
