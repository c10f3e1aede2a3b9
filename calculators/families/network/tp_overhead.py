"""Latency that tensor parallelism adds to a forward pass: per-layer all-reduces of the activations.

Each TP layer ends its attention and MLP blocks with an all-reduce of a [tokens, hidden] activation
(Megatron style: two per layer). With the α–β ring model an all-reduce costs
2(p−1)·α + 2(p−1)/p · M / B, so a decode step (M = one token's row) is bound by start-up latency α,
while a prefill of thousands of tokens is bound by bandwidth (cases `collective-paths-and-diagnosis`,
`model-parallelism`; compendium page on inference-time parallelism).

With a model and a `hardware` id the step model (`calculators.perf.step_times`) supplies the rest of the step: the
all-reduces are the collectives of its operation list for one rank, and the kernels' time (peak-rate bound and
measured estimate) stands beside them, so the answer is the whole decode or prefill step and the share
communication takes of it — the same step time the deployment planner gives for that split.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_rate, fmt_s, Lookup,
    NonNegFloatSweep, NonNegIntSweep, num, out, Outputs, OutSweep, PosFloatSweep, PosInt, PosIntSweep, Profile,
    request_inputs, Result,
)
from calculators.domain import (
    FormatField, FORMAT_HELP, hardware_spec, layout_of, MODEL_CONFIG_FIELD, model_record, note_scope, resolve_format,
    shipped_weight_formats,
)
from calculators.framework import headline as hf
from calculators.perf import (
    ESTIMATE_FIELD, Estimate, FORMULAS, Algorithm, collective_cost, estimate_system, rates_from_spec,
    resolve_link, step_times,
)


class TpOverheadRequest(CalcRequest):
    """All-reduce cost of tensor parallelism for one forward pass over `tokens`."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id supplying hidden_size and layers.", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    hidden_size: Annotated[int, Field(ge=1, le=10**7)] | None = Field(None, description="Hidden size d (values per token row); overrides the model.", examples=[4096])
    layers: Annotated[int, Field(ge=1, le=100_000)] | None = Field(None, description="Transformer layers; overrides the model.", examples=[36])
    tokens: PosIntSweep = Field(description="Tokens in the step whose activations are reduced: the batch for decode (1 token each), "
                                "the prompt length for prefill. Sweepable.", examples=[1])
    activation_bytes: Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)] = Field(2.0, description="Bytes per activation value (BF16/FP16 = 2).")
    tp: PosIntSweep = Field(description="Tensor-parallel degree p (ranks in each all-reduce). Sweepable.", examples=[8])
    allreduces_per_layer: Annotated[int, Field(ge=0, le=1000)] = Field(2, description="All-reduces per layer (Megatron: 2, after attention and after MLP).")
    algorithm: Algorithm = Field("ring", description="ring | tree | direct (see the collective calculator).")
    link: str | None = Field(None, min_length=1, max_length=100, description="Link id supplying bandwidth and α when not given.", examples=["nvlink4"])
    link_alpha_s: NonNegFloatSweep | None = Field(None, description="Start-up latency α per dependent round, seconds. Sweepable.", examples=[2e-6])
    link_bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Effective one-way bandwidth per rank, bytes/s "
                                                             "(not a bidirectional aggregate). Sweepable.", examples=[50e9])
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id. With a model: the step "
                                 "model times the step's kernels on it (bound and measured) and supplies the all-reduces; "
                                 "its first listed link (with a measured all-reduce fit on this hardware where one exists) is "
                                 "the default link.", examples=["h100-sxm"])
    phase: Literal["decode", "prefill"] = Field("decode", description="With a model and hardware: decode = `tokens` sequences "
                                                "adding one token each; prefill = one prompt of `tokens` tokens.")
    context_tokens: NonNegIntSweep = Field(0, description="With a model and hardware: tokens already cached per sequence "
                                           "before the step. Sweepable.", examples=[2048])
    ep: PosInt = Field(1, description="With a model and hardware: expert-parallel ranks inside the TP group (MoE; "
                       "default 1: every expert sliced over the TP ranks).")
    weight_format: FormatField | None = Field(None, description="With a model and hardware: weight format (default: the "
                                              "model's published one). " + FORMAT_HELP)
    kv_format: FormatField | None = Field(None, description="With a model and hardware: KV cache format (default bf16). " + FORMAT_HELP)
    estimate: Estimate | None = ESTIMATE_FIELD


#: a number, or one per point when an input is swept (null where not finite: every time without a bandwidth)
#: which part of an all-reduce is larger at each point
TpTerm = Literal["latency", "bandwidth"]


class TpOverheadOutputs(Outputs):
    """Outputs of tp-overhead; lists where an input is swept. Times are null without a bandwidth or link."""

    bytes_per_allreduce: OutSweep = Field(description="Activation reduced by each all-reduce, tokens × hidden × bytes, B.")
    sent_bytes_per_rank: OutSweep = Field(description="Bytes each rank sends in one all-reduce, B.")
    allreduces: int = Field(description="All-reduces in the forward pass, layers × all-reduces per layer.")
    per_allreduce_s: OutSweep = Field(description="One all-reduce, rounds × α + wire bytes / bandwidth, s.")
    latency_part_s: OutSweep = Field(description="Start-up part of one all-reduce, rounds × α, s.")
    bandwidth_part_s: OutSweep = Field(description="Data-movement part of one all-reduce, s.")
    per_layer_s: OutSweep = Field(description="All-reduce time per layer, s.")
    total_s: OutSweep = Field(description="All-reduce time of the whole forward pass, s.")
    total_latency_part_s: OutSweep = Field(description="Start-up part over the pass, s.")
    total_bandwidth_part_s: OutSweep = Field(description="Data-movement part over the pass, s.")
    saved_if_alpha_halves_s: OutSweep = Field(description="Time saved per pass if α were halved, s.")
    saved_if_bandwidth_doubles_s: OutSweep = Field(description="Time saved per pass if the bandwidth doubled, s.")
    dominant: TpTerm | list[TpTerm] | None = Field(description="'latency' or 'bandwidth', the larger part of an "
                                                   "all-reduce (null without a bandwidth).")
    compute_time_s: OutSweep = Field(None, description="The step's kernels on one rank at the peak rates, the step model's "
                                     "bound, s (model and hardware).")
    compute_per_layer_s: OutSweep = Field(None, description="compute_time_s / layers, s (model and hardware).")
    step_time_s: OutSweep = Field(None, description="compute_time_s + total_s: the whole step with its all-reduces, s "
                                  "(model and hardware).")
    comm_share: OutSweep = Field(None, description="total_s / step_time_s, the share of the step spent in all-reduces.")
    measured_compute_time_s: OutSweep = Field(None, description="The step's kernels from measured tables, without the "
                                              "tables' own all-reduces, s (measured estimate).")
    measured_step_time_s: OutSweep = Field(None, description="measured_compute_time_s + total_s, s (measured estimate).")
    measured_comm_share: OutSweep = Field(None, description="total_s / measured_step_time_s.")
    measured_fallback_fraction: OutSweep = Field(None, description="Share of the measured kernels from ops with no "
                                                 "measured table (their bound ÷ the step's measured GEMM efficiency).")
    measured_kernels: dict[str, str] | None = Field(None, description="The measured system, framework and version.")


STEP_ONLY = ("context_tokens", "ep", "weight_format", "kv_format", "estimate", "phase")


def _step_model(req: TpOverheadRequest, lookup: Lookup, res: Result, rec, hw, n, p, ctx):
    """The step model's operations for the step (one list per TP degree): the all-reduce messages and counts, and the
    kernels' bound and measured time. Returns (M, count, kernels bound, kernels measured or None, StepTimes)."""
    lay = layout_of(rec, "model" if req.model is not None else "model_config")
    for k in ("hidden_size", "layers"):
        if getattr(req, k) is not None:
            raise CalcInputError(k, "with a model and hardware the step model takes the shapes from the model; leave it out")
    for k, default in (("allreduces_per_layer", 2), ("activation_bytes", 2.0)):
        if k in req.model_fields_set and getattr(req, k) != default:
            raise CalcInputError(k, "with a model and hardware the all-reduces are the step model's (two per layer of BF16 "
                                 "activations); leave it out, or drop hardware for a count of your own")
    for note in lay.notes:
        res.assume(note)
    if req.weight_format is not None:
        wf = resolve_format(req.weight_format, "weight_format")
        res.assume(f"Weight format: {wf.name} (given).")
    else:
        shipped = shipped_weight_formats(rec.weight_dtype)
        wf = shipped.for_component if shipped is not None else resolve_format("bf16")
        res.assume(f"Weight format: as published, {shipped.label} ({shipped.note})." if shipped is not None else
                   "Weight format: bf16 (the model states no published format; give weight_format).")
    kf = resolve_format(req.kv_format, "kv_format", "bf16")
    system = estimate_system(lookup, hw, req.estimate)
    batch, new = (n, 1) if req.phase == "decode" else (1, n)
    try:
        st = step_times(lay, rates_from_spec(hw), req.phase, batch, new, ctx, p, req.ep, wf, kf, system)
    except CalcInputError as exc:
        if exc.loc == ("tp",):
            raise
        if req.estimate == "measured":
            raise CalcInputError("estimate", f"no measured estimate: {exc.message}; use estimate='bound'") from None
        res.assume(f"No measured estimate: {exc.message}.")
        st = step_times(lay, rates_from_spec(hw), req.phase, batch, new, ctx, p, req.ep, wf, kf, None)
    shape = st.kernels_bound_s.shape
    M, count = np.zeros(shape), 0
    for ops, mask in zip(st.ops, st.masks):
        for op in ops.ops:
            if op.kind == "allreduce":
                M[mask] = np.asarray(op.shape["bytes"], dtype=float)
                count = max(count, int(op.count))
            elif op.kind in ("alltoall", "p2p"):
                raise CalcInputError("ep", f"this split needs a {op.kind} the tp-overhead model does not time")
    res.step("kernels of the step (bound)", "Σ ops max(FLOPs / peak, bytes / bandwidth) on one rank (step model)",
             f"{req.phase}, {num(first(n))} tokens, context {num(first(ctx))}, TP {num(first(p))}"
             + (f", EP {req.ep}" if req.ep > 1 else ""), st.kernels_bound_s, "s")
    res.assume(f"{rec.label}: the all-reduces are the step model's collectives (two per layer, of each rank's "
               "[tokens, hidden] BF16 activation; none at TP 1); the step's kernels are timed by the step model on "
               f"{hw.id} and added to them back to back (no overlap).")
    if system is not None and st.kernels_measured_s is not None:
        res.cite({"record": system.name, "field": "measured kernel tables", "value": None,
                  "source": "aiconfigurator-core-0.12.0", "locator": ", ".join(sorted(system.tables))})
        res.step("kernels of the step (measured)", "Σ ops measured kernel time (interpolated), without the tables' "
                 "all-reduces", f"{st.framework} {st.version} on {system.name}", st.kernels_measured_s, "s")
        res.assume(f"Measured kernels: {st.framework} {st.version} on {system.name} (NVIDIA AIConfigurator's tables, "
                   "Apache-2.0); the all-reduces keep this calculator's α–β link model.")
    return M, count, st.kernels_bound_s, st.kernels_measured_s, st, system


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute(req: TpOverheadRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    hidden, layers = req.hidden_size, req.layers
    rec = model_record(req, lookup, res, required=False)
    hw = None
    if req.hardware is not None:
        hw = hardware_spec(lookup, req.hardware, "hardware")
        note_scope(res, hw)
    stepped = hw is not None and rec is not None
    if not stepped:
        stray = [k for k in STEP_ONLY if k in req.model_fields_set]
        if stray:
            raise CalcInputError(stray[0], "times the step's kernels: give a model (or model_config) with hardware")
    if rec is not None and not stepped:
        src = "model" if req.model is not None else "model_config"
        if hidden is None:
            hidden = rec.value("hidden_size", loc=src)
            res.cite(rec.source("hidden_size"))
        if layers is None:
            layers = rec.value("layers", loc=src)
            res.cite(rec.source("layers"))
    if not stepped and hidden is None:
        raise CalcInputError("hidden_size", "give hidden_size, a model id or a model_config")
    if not stepped and layers is None:
        raise CalcInputError("layers", "give layers, a model id or a model_config")
    link_id = req.link
    if link_id is None and hw is not None and (req.link_alpha_s is None or req.link_bandwidth_bytes_per_s is None) and hw.links:
        link_id = hw.links[0]
        res.assume(f"Link: {link_id}, the first link {hw.id} lists (give `link` for another).")
    alpha, bw = resolve_link(lookup, res, link_id, req.link_alpha_s, req.link_bandwidth_bytes_per_s,
                             alpha_loc="link_alpha_s", need_alpha=False, gpus=req.tp, hardware=hw.id if hw is not None else None)
    no_alpha = alpha is None
    x = broadcast({"tokens": req.tokens, "tp": req.tp, "link_alpha_s": 0.0 if alpha is None else alpha,
                   "link_bandwidth_bytes_per_s": np.nan if bw is None else bw,
                   **({"context_tokens": req.context_tokens} if stepped else {})})
    n, p, a, B = x["tokens"], x["tp"], x["link_alpha_s"], x["link_bandwidth_bytes_per_s"]
    kern = kern_m = system = None
    if stepped:
        M, n_ar, kern, kern_m, st, system = _step_model(req, lookup, res, rec, hw, n, p, x["context_tokens"])
        layers = st.ops[0].layout.layers
        per_layer_ar = n_ar / layers if layers else 0
        M = res.step("bytes per all-reduce", "M = the step model's all-reduce message (tokens × hidden × 2 B per rank)",
                     f"{num(first(n))} tokens × {num(st.ops[0].layout.d)} × 2 B", M, "B")
    else:
        M = res.step("bytes per all-reduce", "M = tokens × hidden × bytes", f"{num(first(n))} × {num(hidden)} × {num(req.activation_bytes)}",
                     n * float(hidden) * req.activation_bytes, "B")
        per_layer_ar = req.allreduces_per_layer
        n_ar = layers * req.allreduces_per_layer
    c = collective_cost("all_reduce", req.algorithm, p, M)
    lat = c["rounds"] * a
    with np.errstate(invalid="ignore"):
        bwp = c["wire"] / B
    t = res.step(f"one all-reduce ({req.algorithm})", "t = " + FORMULAS[("all_reduce", req.algorithm)],
                 f"{num(first(c['rounds']))} × {fmt_s(first(a))} + {fmt_bytes(first(c['wire']))} / "
                 + (fmt_rate(first(B)) if bw is not None else "—"), lat + bwp, "s")
    per_layer = res.step("per layer", "t_layer = all-reduces per layer × t", f"{num(per_layer_ar)} × {fmt_s(first(t)) if bw is not None else '—'}",
                         t * per_layer_ar, "s")
    total = res.step("whole forward pass", "T = layers × t_layer", f"{num(layers)} × {fmt_s(first(per_layer)) if bw is not None else '—'}",
                     per_layer * layers, "s")
    lat_total, bw_total = lat * n_ar, bwp * n_ar
    if bw is not None:
        res.step("latency vs data movement", "T = n_ar × rounds × α  +  n_ar × wire bytes / B",
                 f"{fmt_s(first(lat_total))} + {fmt_s(first(bw_total))}", lat_total, "s")
    dominant = np.where(lat >= bwp, "latency", "bandwidth")
    res.outputs = {
        "bytes_per_allreduce": out(M),
        "sent_bytes_per_rank": out(c["sent"]),
        "allreduces": int(n_ar),
        "per_allreduce_s": out(t),
        "latency_part_s": out(lat if bw is not None else lat * np.nan),
        "bandwidth_part_s": out(bwp),
        "per_layer_s": out(per_layer),
        "total_s": out(total),
        "total_latency_part_s": out(lat_total if bw is not None else lat_total * np.nan),
        "total_bandwidth_part_s": out(bw_total),
        "saved_if_alpha_halves_s": out(lat_total / 2 if bw is not None else lat_total * np.nan),
        "saved_if_bandwidth_doubles_s": out(bw_total / 2),
        "dominant": (out(dominant) if np.ndim(dominant) else str(dominant)) if bw is not None else None,
    }
    if stepped:
        step = res.step("whole step", "T_step = kernels (bound) + all-reduces", f"{fmt_s(first(kern))} + "
                        + (fmt_s(first(total)) if bw is not None else "—"), kern + total, "s")
        res.outputs.update(compute_time_s=out(kern), compute_per_layer_s=out(kern / layers), step_time_s=out(step),
                           comm_share=out(total / step))
        if kern_m is not None:
            step_m = res.step("whole step (measured)", "T_step = measured kernels + all-reduces",
                              f"{fmt_s(first(kern_m))} + " + (fmt_s(first(total)) if bw is not None else "—"), kern_m + total, "s")
            res.outputs.update(measured_compute_time_s=out(kern_m), measured_step_time_s=out(step_m),
                               measured_comm_share=out(total / step_m),
                               measured_fallback_fraction=out(np.asarray(st.fallback_fraction, dtype=float)),
                               measured_kernels={"system": system.name, "framework": str(st.framework),
                                                 "version": str(st.version)})
    res.assume(
        f"{num(per_layer_ar)} all-reduce(s) per layer of the whole [tokens, hidden] activation, serialised after the "
        "layer's compute (no overlap with compute, no fusion).",
        "α–β model: α per dependent round, the busiest rank's bytes at the one-way bandwidth; reduction arithmetic, "
        "kernel launch outside α, and the LM head are not counted.",
        "Use a link's one-way rate: NVLink and PCIe are often quoted as bidirectional aggregates (2× one way).",
    )
    if no_alpha:
        res.assume("No α given and none on the link: start-up latency taken as 0, so decode overhead is understated.")
    if bw is None:
        res.assume("No bandwidth or link given: message sizes only, times are null.")
    res.headline = _headline(req, res.outputs, rec, bw is not None)
    return res


def _headline(req: TpOverheadRequest, o: dict, rec: dict | None, timed: bool) -> str:
    """All-reduce time per forward pass at a TP degree, and with the step model the whole step (a sweep: its first
    point)."""
    n = hf.n_points(req.tokens, req.tp, req.link_alpha_s, req.link_bandwidth_bytes_per_s, req.context_tokens)
    who = hf.name_of(rec) if rec is not None else "the model"
    stepped = o.get("step_time_s") is not None
    text = f"At TP {hf.fmt_count(req.tp)}, a forward pass of {who} over {hf.plural(req.tokens, 'token')} runs "
    if stepped and hf.scalar(req.tp) == 1:      # the step model reduces nothing on one rank
        text += "no all-reduce"
    else:
        text += f"{hf.fmt_count(o.get('allreduces'))} all-reduces of {hf.fmt_bytes(o.get('bytes_per_allreduce'))}"
        if req.link:
            text += f" on {req.link}"
        if timed and o.get("total_s") is not None:
            text += (f", {hf.fmt_seconds(o['total_s'])} of communication ({hf.first_value(o.get('dominant'))}-bound; "
                     f"halving α saves {hf.fmt_seconds(o.get('saved_if_alpha_halves_s'))}, doubling bandwidth saves "
                     f"{hf.fmt_seconds(o.get('saved_if_bandwidth_doubles_s'))})")
        else:
            text += " (no bandwidth given, so no time)"
    if stepped and hf.scalar(o["step_time_s"]) is not None:
        measured = o.get("measured_step_time_s") is not None
        step = o["measured_step_time_s"] if measured else o["step_time_s"]
        share = o.get("measured_comm_share") if measured else o.get("comm_share")
        text += (f"; the whole step takes {hf.fmt_seconds(step)} on {req.hardware} "
                 f"({'measured kernels' if measured else 'peak-rate bound'}), {hf.fmt_pct(share)} of it in all-reduces")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="tp-overhead",
        profile=Profile(7.2e-07, 727, 187),
        family="collective",
        families=("parallel_split",),
        title="Tensor-parallel all-reduce overhead per layer and per pass",
        summary="Added latency of tensor parallelism: per-layer all-reduces of tokens × hidden × bytes over a link, "
                "split into start-up latency and data movement, for decode (1 token) or prefill (thousands).",
        description="M = tokens·hidden·bytes; one ring all-reduce t = 2(p−1)α + 2(p−1)/p·M/B; per layer × all-reduces per "
                    "layer; total × layers. Reports which part dominates and what halving α or doubling B saves. Decode "
                    "(M of a few KiB) is latency-bound; long prefill is bandwidth-bound.",
        request_model=TpOverheadRequest,
        compute=compute,
        outputs_model=TpOverheadOutputs,
        example={"hidden_size": 4096, "layers": 36, "tokens": [1, 16, 8192], "tp": 8, "allreduces_per_layer": 2,
                 "link_alpha_s": 2e-6, "link_bandwidth_bytes_per_s": 50e9},
        cases=("collective-paths-and-diagnosis", "model-parallelism", "communication-tuning"),
        sweepable=("tokens", "tp", "link_alpha_s", "link_bandwidth_bytes_per_s"),
        chart=Chart(x="tokens", y=("total_latency_part_s", "total_bandwidth_part_s"), kind="stacked-bar",
                    x_label="tokens per step", y_label="seconds added per pass"),
    ),
]
