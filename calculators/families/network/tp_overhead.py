"""Latency that tensor parallelism adds to a forward pass: per-layer all-reduces of the activations.

Each TP layer ends its attention and MLP blocks with an all-reduce of a [tokens, hidden] activation
(Megatron style: two per layer). With the α–β ring model an all-reduce costs
2(p−1)·α + 2(p−1)/p · M / B, so a decode step (M = one token's row) is bound by start-up latency α,
while a prefill of thousands of tokens is bound by bandwidth (cases `collective-paths-and-diagnosis`,
`model-parallelism`; compendium page on inference-time parallelism).
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_rate, fmt_s, Lookup,
    NonNegFloatSweep, num, out, Outputs, OutSweep, PosFloatSweep, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.domain import MODEL_CONFIG_FIELD, model_record
from calculators.framework import headline as hf
from calculators.perf import FORMULAS, Algorithm, collective_cost, resolve_link


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


@np.errstate(divide="ignore", invalid="ignore", over="ignore")
def compute(req: TpOverheadRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    hidden, layers = req.hidden_size, req.layers
    rec = model_record(req, lookup, res, required=False)
    if rec is not None:
        src = "model" if req.model is not None else "model_config"
        if hidden is None:
            hidden = rec.value("hidden_size", loc=src)
            res.cite(rec.source("hidden_size"))
        if layers is None:
            layers = rec.value("layers", loc=src)
            res.cite(rec.source("layers"))
    if hidden is None:
        raise CalcInputError("hidden_size", "give hidden_size, a model id or a model_config")
    if layers is None:
        raise CalcInputError("layers", "give layers, a model id or a model_config")
    alpha, bw = resolve_link(lookup, res, req.link, req.link_alpha_s, req.link_bandwidth_bytes_per_s,
                             alpha_loc="link_alpha_s", need_alpha=False, gpus=req.tp)
    no_alpha = alpha is None
    x = broadcast({"tokens": req.tokens, "tp": req.tp, "link_alpha_s": 0.0 if alpha is None else alpha,
                   "link_bandwidth_bytes_per_s": np.nan if bw is None else bw})
    n, p, a, B = x["tokens"], x["tp"], x["link_alpha_s"], x["link_bandwidth_bytes_per_s"]
    M = res.step("bytes per all-reduce", "M = tokens × hidden × bytes", f"{num(first(n))} × {num(hidden)} × {num(req.activation_bytes)}",
                 n * float(hidden) * req.activation_bytes, "B")
    c = collective_cost("all_reduce", req.algorithm, p, M)
    lat = c["rounds"] * a
    with np.errstate(invalid="ignore"):
        bwp = c["wire"] / B
    t = res.step(f"one all-reduce ({req.algorithm})", "t = " + FORMULAS[("all_reduce", req.algorithm)],
                 f"{num(first(c['rounds']))} × {fmt_s(first(a))} + {fmt_bytes(first(c['wire']))} / "
                 + (fmt_rate(first(B)) if bw is not None else "—"), lat + bwp, "s")
    n_ar = layers * req.allreduces_per_layer
    per_layer = res.step("per layer", "t_layer = all-reduces per layer × t", f"{req.allreduces_per_layer} × {fmt_s(first(t)) if bw is not None else '—'}",
                         t * req.allreduces_per_layer, "s")
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
        "allreduces": n_ar,
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
    res.assume(
        f"{req.allreduces_per_layer} all-reduce(s) per layer of the whole [tokens, hidden] activation, serialised after the "
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
    """All-reduce time per forward pass at a TP degree (a sweep: its first point)."""
    n = hf.n_points(req.tokens, req.tp, req.link_alpha_s, req.link_bandwidth_bytes_per_s)
    who = hf.name_of(rec) if rec is not None else "the model"
    text = (f"At TP {hf.fmt_count(req.tp)}, a forward pass of {who} over {hf.plural(req.tokens, 'token')} runs "
            f"{hf.fmt_count(o.get('allreduces'))} all-reduces of {hf.fmt_bytes(o.get('bytes_per_allreduce'))}")
    if req.link:
        text += f" on {req.link}"
    if timed and o.get("total_s") is not None:
        text += (f", {hf.fmt_seconds(o['total_s'])} of communication ({hf.first_value(o.get('dominant'))}-bound; "
                 f"halving α saves {hf.fmt_seconds(o.get('saved_if_alpha_halves_s'))}, doubling bandwidth saves "
                 f"{hf.fmt_seconds(o.get('saved_if_bandwidth_doubles_s'))})")
    else:
        text += " (no bandwidth given, so no time)"
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
