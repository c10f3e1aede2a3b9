"""Training compute: C ≈ 6·N·D and its refinements, then device-hours and days.

Forward 2·N per token, backward 4·N (input and weight gradients): 6·N·D for N matrix parameters
touched per token (MoE: the active experts only) over D tokens. Refinements: causal attention
(QKᵀ and AV over the S(S+1)/2 pairs of a sequence, forward + backward = 3 × forward), full
activation recompute (one more forward: 8·N·D), and an LM head term. Time follows from devices ×
peak × MFU, or from a reported GPU-hours budget or a measured throughput.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_s, FractionSweep, Lookup, NonNegInt, num,
    out, Outputs, OutSweep, PosFloatSweep, PosInt, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.domain import arch_matrix_params, hardware_rates, layout_of, ledger, matrix_params, MODEL_CONFIG_FIELD, resolve_arch, ShapeArchitecture
from calculators.perf import step_ops
from calculators.framework import headline as hf


class AttentionShape(CalcRequest):
    """Attention layers for the pair term, when the model is given by a parameter count."""

    layers: PosInt = Field(description="Layers with full (quadratic) attention.", examples=[36])
    heads: PosInt = Field(description="Query heads.", examples=[32])
    head_dim: PosInt = Field(description="Q/K width per head.", examples=[128])
    v_head_dim: NonNegInt = Field(0, description="V width per head (0 = head_dim).")


class TrainingComputeRequest(CalcRequest):
    model: str | None = Field(None, min_length=1, max_length=100, description="Model id in the store.", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    architecture: ShapeArchitecture | None = Field(None, description="Explicit shapes instead of a model id.")
    params: PosFloatSweep | None = Field(None, description="N: matrix parameters used per token (MoE: active). Sweepable.", examples=[8e9])
    tokens: PosFloatSweep | None = Field(None, description="D: training tokens (without it only per-token FLOPs are given). Sweepable.", examples=[100e9])
    sequence_tokens: PosIntSweep | None = Field(None, description="Sequence length S for the causal attention term. Sweepable.")
    attention: AttentionShape | None = Field(None, description="Attention shape for the pair term with `params`.")
    include_lm_head: bool = Field(True, description="Count the output projection (2·V·d per token forward) with model/architecture.")
    recompute: Literal["none", "full"] = Field("none", description="full: activations recomputed in backward (one more forward: 8·N·D).")
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id for the precision-matched dense peak.", examples=["h100-sxm"])
    precision: str = Field("BF16", max_length=10, description="Peak row precision.")
    sparsity: Literal["dense", "structured"] = Field("dense", description="Peak row sparsity (dense unless asked).")
    peak_flop_per_s: PosFloatSweep | None = Field(None, description="Explicit peak FLOP/s per device. Sweepable.")
    devices: PosIntSweep = Field(1, description="Devices training together. Sweepable.", examples=[16])
    mfu: FractionSweep = Field(0.4, description="Model FLOPs utilisation: achieved / peak (> 0). Sweepable.")
    gpu_hours: PosFloatSweep | None = Field(None, description="A reported device-hours budget (instead of peak × MFU). Sweepable.")
    tokens_per_s: PosFloatSweep | None = Field(None, description="A measured training throughput for all devices (instead of peak × MFU). Sweepable.")
    target_s: PosFloatSweep | None = Field(None, description="A deadline in seconds: the effective FLOP/s each device must sustain. Sweepable.")

    @model_validator(mode="after")
    def _check(self):
        given = [k for k in ("model", "hf_config", "architecture", "params") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError("give at most one of model, model_config, architecture, params")
        if not given and self.gpu_hours is None and (self.tokens is None or self.tokens_per_s is None):
            raise ValueError("give model, model_config, architecture or params (or a gpu_hours budget, or tokens with tokens_per_s)")
        if self.hardware and self.peak_flop_per_s is not None:
            raise ValueError("give hardware or peak_flop_per_s, not both")
        if self.gpu_hours is not None and self.tokens_per_s is not None:
            raise ValueError("give gpu_hours or tokens_per_s, not both")
        return self


#: a number, or one per point when an input is swept (null where not finite)


class TrainingComputeByComponentOut(Outputs):
    """Training FLOPs per token of each matrix component, 6 × params (× 8/6 with full recompute)."""

    attention: float | None = Field(description="Attention projections, FLOP/token.")
    dense_ffn: float | None = Field(description="Dense FFN matrices, FLOP/token.")
    routed_experts: float | None = Field(description="The routed experts a token uses, FLOP/token.")
    shared_experts: float | None = Field(description="Shared experts, FLOP/token.")
    router: float | None = Field(description="Router, FLOP/token.")
    lm_head: float | None = Field(description="Output projection, FLOP/token (0 with include_lm_head false).")


class TrainingComputeOutputs(Outputs):
    """Outputs of training-compute; lists where an input is swept. The FLOP keys need a model, architecture or
    params; totals need tokens; times need a peak, a GPU-hours budget or a throughput."""

    flops_per_token_by_component: TrainingComputeByComponentOut | None = Field(None, description="Per component "
                                                                               "(model or architecture).")
    params_total: float | None = Field(None, description="All parameters of the model (model or architecture).")
    expert_flops_per_token: float | None = Field(None, description="Routed + shared expert FLOPs per token, "
                                                 "FLOP/token (MoE).")
    expert_flops: OutSweep = Field(None, description="Expert FLOPs over the tokens, FLOP (MoE, with tokens).")
    flops_per_token: OutSweep = Field(None, description="Dense + attention training FLOPs per token, FLOP/token.")
    dense_flops_per_token: OutSweep = Field(None, description="6 × N (× 8/6 with full recompute), FLOP/token.")
    attention_flops_per_token: OutSweep = Field(None, description="Causal attention term, 3·(S+1)·H·(d_qk+d_v)·L, "
                                                   "FLOP/token (0 without sequence_tokens).")
    flops_per_token_per_param: OutSweep = Field(None, description="flops_per_token / N (6 for plain 6ND).")
    params: OutSweep = Field(None, description="N: matrix parameters used per token (MoE: active).")
    six_nd_flops: OutSweep = Field(None, description="6 × N × D, FLOP (with tokens).")
    flops_total: OutSweep = Field(None, description="flops_per_token × D, FLOP (with tokens).")
    tokens_per_param: OutSweep = Field(None, description="D / N (with tokens).")
    wall_s: OutSweep = Field(None, description="Wall time of the run, s.")
    days: OutSweep = Field(None, description="wall time / 86400, days.")
    gpu_hours: OutSweep = Field(None, description="wall time × devices / 3600, device-hours.")
    tokens_per_s: OutSweep = Field(None, description="D / wall time, tokens/s (with tokens).")
    implied_mfu: OutSweep = Field(None, description="FLOPs / (wall × devices × peak): the MFU a budget or "
                                     "throughput implies, a fraction.")
    required_flop_per_s_per_device: OutSweep = Field(None, description="FLOPs / (devices × target_s), FLOP/s "
                                                        "(with target_s).")
    required_peak_flop_per_s_at_mfu: OutSweep = Field(None, description="That rate / MFU: the peak each device "
                                                         "needs, FLOP/s (with target_s).")
    peak_flop_per_s: OutSweep = Field(None, description="Dense peak per device used, FLOP/s (with a peak).")


def compute(req: TrainingComputeRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    o: dict = {}
    x = broadcast({"params": req.params if req.params is not None else 1.0,
                   "tokens": req.tokens if req.tokens is not None else 1.0,
                   "sequence_tokens": req.sequence_tokens if req.sequence_tokens is not None else 1,
                   "devices": req.devices, "mfu": req.mfu,
                   "peak_flop_per_s": req.peak_flop_per_s if req.peak_flop_per_s is not None else 1.0,
                   "gpu_hours": req.gpu_hours if req.gpu_hours is not None else 1.0,
                   "tokens_per_s": req.tokens_per_s if req.tokens_per_s is not None else 1.0,
                   "target_s": req.target_s if req.target_s is not None else 1.0})
    D = x["tokens"]
    S = x["sequence_tokens"]
    dev = x["devices"]
    factor = 8.0 / 6.0 if req.recompute == "full" else 1.0
    flops_total = None
    rec = None
    has_model = any(v is not None for v in (req.model, req.hf_config, req.architecture, req.params))
    if has_model:
        attn_shape = None
        if req.params is not None:
            N = x["params"]
            res.step("N", "matrix parameters per token (explicit)", num(first(N)), N, "params")
            if req.attention:
                a = req.attention
                attn_shape = (a.layers, a.heads, a.head_dim, a.v_head_dim or a.head_dim)
        else:
            arch, rec = resolve_arch(req, lookup, res)
            if arch is None and req.hf_config is not None and "params_active" not in rec:
                raise CalcInputError("model_config", f"attention '{rec.attention}' has no parameter ledger here, so the "
                                     "config gives no parameter count: give `params` (and `attention`) instead")
            # the one count of the parameters a token multiplies, shared with prefix-cache (calculators.domain)
            loc = "model" if req.model is not None else "model_config"
            counted = matrix_params(rec, res, req.include_lm_head, loc) if rec is not None else \
                arch_matrix_params(arch, req.include_lm_head)
            N = np.asarray(counted.total) + 0.0 * D
            comp = counted.components
            res.step("N", counted.basis if comp is None else "active matrix params per token: " + counted.basis,
                     num(first(N)) if comp is None else " + ".join(num(v) for v in comp.values() if v), N, "params")
            if arch is not None:
                led = ledger(arch)
                o["flops_per_token_by_component"] = {k: 6.0 * factor * v for k, v in comp.items()}
                if arch.experts:
                    o["expert_flops_per_token"] = 6.0 * factor * (comp["routed_experts"] + comp["shared_experts"])
                    res.step("expert FLOPs / token", "6 × L_moe × (k + shared) × 3 × d × f_e",
                             f"6 × {arch.moe_layers} × ({arch.top_k} + {arch.shared}) × {arch.ffn_matrices} × {arch.d} × {arch.expert_ffn}",
                             o["expert_flops_per_token"], "FLOP")
                    if req.tokens is not None:
                        o["expert_flops"] = out(o["expert_flops_per_token"] * D)
                if arch.heads:
                    attn_shape = (arch.layers, arch.heads, arch.qk_dim, arch.vo_dim)
                o["params_total"] = float(led["total"])
        per_tok_dense = 6.0 * N * factor
        attn_tok = 0.0 * D
        if req.sequence_tokens is not None:
            if attn_shape is None and rec is not None:
                attn_tok = layered_attention_flops(rec, "model" if req.model is not None else "model_config", S, res) * factor
            elif attn_shape is None:
                raise CalcInputError("sequence_tokens", "the attention term needs shapes: a model, an architecture, or `attention`")
            else:
                La, H, dqk, dv = attn_shape
                attn_tok = 3.0 * (S + 1) * H * (dqk + dv) * La * factor
                res.step("attention FLOPs / token", "3 × (S+1) × H × (d_qk + d_v) × L_attn  (= 6·L·H·d·(S+1) when d_qk = d_v)",
                         f"3 × ({num(first(S))} + 1) × {H} × ({dqk} + {dv}) × {La}", attn_tok, "FLOP")
            res.assume("Attention: QKᵀ and AV over the causal triangle S(S+1)/2 of every sequence, backward = 2 × forward.")
        per_tok = per_tok_dense + attn_tok
        if factor != 1.0:
            res.assume("Full recompute: the forward pass runs twice, so every term is × 8/6.")
        res.step("FLOPs per token", "6N·r + attention", f"{num(first(per_tok_dense))} + {num(first(attn_tok))}", per_tok, "FLOP")
        o.update(flops_per_token=out(per_tok), dense_flops_per_token=out(per_tok_dense),
                 attention_flops_per_token=out(attn_tok), flops_per_token_per_param=out(per_tok / N), params=out(N))
        if req.tokens is not None:
            dense = res.step("6ND", "C = 6 × N × D", f"6 × {num(first(N))} × {num(first(D))}", 6.0 * N * D, "FLOP")
            flops_total = per_tok * D
            res.step("total FLOPs", "C = (6N·r + attention) × D", f"{num(first(per_tok))} × {num(first(D))}", flops_total, "FLOP")
            res.step("tokens per parameter", "D / N", f"{num(first(D))} / {num(first(N))}", D / N, "")
            o.update(six_nd_flops=out(dense), flops_total=out(flops_total), tokens_per_param=out(D / N))

    # time
    peak, _, _ = hardware_rates(req, lookup, res, need_bw=False)
    if peak is not None and req.peak_flop_per_s is not None:
        peak = x["peak_flop_per_s"]
    wall = None
    if req.tokens_per_s is not None and req.tokens is not None:
        wall = res.step("wall time", "t = D / throughput", f"{num(first(D))} / {num(first(x['tokens_per_s']))} tok/s",
                        D / x["tokens_per_s"], "s")
    elif req.gpu_hours is not None:
        wall = res.step("wall time", "t = GPU-hours × 3600 / devices", f"{num(first(x['gpu_hours']))} × 3600 / {num(first(dev))}",
                        x["gpu_hours"] * 3600.0 / dev, "s")
        res.assume("Days from GPU-hours assume every device is allocated for the whole run.")
    elif peak is not None and flops_total is not None:
        if np.any(x["mfu"] <= 0):
            raise CalcInputError("mfu", "must be > 0")
        rate = dev * peak * x["mfu"]
        wall = res.step("wall time", "t = C / (devices × peak × MFU)",
                        f"{num(first(flops_total))} / ({num(first(dev))} × {num(first(peak) / 1e12)} T × {num(first(x['mfu']))})",
                        flops_total / rate, "s")
        res.assume("MFU folds communication, pipeline bubbles and stalls into one utilisation figure; do not add them again.")
    if wall is not None:
        o.update(wall_s=out(wall), days=out(wall / 86400.0), gpu_hours=out(wall * dev / 3600.0))
        res.step("days", "t / 86400", fmt_s(first(wall)), wall / 86400.0, "days")
        if req.tokens is not None:
            o["tokens_per_s"] = out(D / wall)
        if peak is not None and flops_total is not None and (req.gpu_hours is not None or req.tokens_per_s is not None):
            o["implied_mfu"] = out(flops_total / (wall * dev * peak))
    if req.target_s is not None and flops_total is not None:
        need = res.step("required rate per device", "F_dev = C / (devices × T)",
                        f"{num(first(flops_total))} / ({num(first(dev))} × {num(first(x['target_s']))} s)",
                        flops_total / (dev * x["target_s"]), "FLOP/s")
        o["required_flop_per_s_per_device"] = out(need)
        if req.mfu is not None:
            o["required_peak_flop_per_s_at_mfu"] = out(need / np.maximum(x["mfu"], 1e-300))
    if peak is not None:
        o["peak_flop_per_s"] = out(np.asarray(peak) + 0.0 * dev)
    res.assume("6ND counts matrix multiplies only: embeddings lookups, norms, softmax, optimizer and data work are not counted.")
    res.outputs = o
    res.headline = _headline(req, o, rec)
    return res


def _headline(req: TrainingComputeRequest, o: dict, rec: dict | None) -> str:
    """Total FLOPs, wall time, GPU-hours (a sweep: its first point)."""
    n = hf.n_points(req.params, req.tokens, req.sequence_tokens, req.peak_flop_per_s, req.devices, req.mfu,
                    req.gpu_hours, req.tokens_per_s, req.target_s)
    if rec is not None:
        who = hf.name_of(rec)
    elif req.params is not None:
        who = f"a model of {hf.fmt_big(req.params)} parameters per token"
    elif req.architecture is not None:
        who = "the given architecture"
    else:
        who = "the run"
    devices = hf.scalar(o.get("devices") if "devices" in o else req.devices)
    where = f"{hf.fmt_count(devices)} × {req.hardware}" if req.hardware else hf.plural(devices, "device")
    if o.get("flops_total") is not None:
        text = f"Training {who} on {hf.fmt_big(req.tokens)} tokens takes {hf.fmt_flops(o['flops_total'])}"
    elif o.get("flops_per_token") is not None:
        text = f"Training {who} costs {hf.fmt_flops(o['flops_per_token'])} per token"
    else:
        text = f"The {hf.fmt_num(req.gpu_hours)} GPU-hour budget"
    if o.get("wall_s") is not None:
        how = ""
        if req.tokens_per_s is not None:
            how = f" at {hf.fmt_num(req.tokens_per_s)} tokens/s"
        elif req.gpu_hours is None:
            how = f" at {hf.fmt_pct(req.mfu)} MFU"
        verb = ": " if o.get("flops_total") is not None or o.get("flops_per_token") is not None else " is "
        text += f"{verb}{hf.fmt_seconds(o['wall_s'])} of wall time on {where}{how}"
        if req.gpu_hours is None:
            text += f" ({hf.fmt_num(o.get('gpu_hours'))} GPU-hours)"
    if o.get("required_flop_per_s_per_device") is not None:
        text += (f"; finishing in {hf.fmt_seconds(req.target_s)} needs {hf.fmt_flop_rate(o['required_flop_per_s_per_device'])} "
                 "per device")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="training-compute",
        profile=Profile(1.1e-06, 665, 294),
        family="training_compute",
        title="Training compute, GPU-hours and days",
        summary="C ≈ 6·N·D with attention, MoE-active and recompute refinements, then wall time, days and GPU-hours on "
                "N devices of a hardware id at a given MFU (or from a GPU-hours budget or a measured throughput).",
        description="Per token: 6·N (N = matrix params used per token; MoE counts active experts), × 8/6 with full "
                    "recompute, + 3·(S+1)·H·(d_qk+d_v)·L for causal attention at sequence length S. t = C / (devices × "
                    "dense peak × MFU); days = t/86400; GPU-hours = t × devices / 3600. A deadline gives the effective "
                    "FLOP/s each device must sustain.",
        request_model=TrainingComputeRequest,
        compute=compute,
        outputs_model=TrainingComputeOutputs,
        example={"model": "qwen3-8b", "tokens": 100e9, "sequence_tokens": 8192, "hardware": "h100-sxm",
                 "devices": [16, 64, 256], "mfu": 0.4},
        cases=("scaling-history", "training-compute", "inference-training-scenarios"),
        sweepable=("params", "tokens", "sequence_tokens", "peak_flop_per_s", "devices", "mfu", "gpu_hours",
                   "tokens_per_s", "target_s"),
        chart=Chart(x="devices", y=("days",), x_label="devices", y_label="days"),
    ),
]


#: the step model's token-mixing operations (score and value products, indexers, recurrent state updates), as
#: opposed to its projection GEMMs, which 6·N already counts
MIXING_OPS = ("attention", "mla", "indexer", "linear")
#: the formula each of those operations counts (forward, per token of an S-token sequence, per layer)
MIXING_FORMULA = {
    "attention": "full: (S+1)·H·(d_qk+d_v); sliding window / chunk w: pairs of min(S, w) keys per query",
    "mla_attention": "MLA: (S+1)·H·(qk_nope+qk_rope + v_head_dim); with a DSA indexer the main attention reads top-k keys",
    "dsa_indexer": "DSA indexer over all S keys: (S+1)·index_heads·index_head_dim",
    "compressed_attention": "window pairs + S/ratio compressed keys (top-k on CSA): 2·H·(d_qk+d_v) per pair",
    "csa_indexer": "CSA indexer: 2·(S/ratio)·index_heads·index_head_dim",
    "linear": "linear/recurrent state update: 6·state elements per token (no S² term)",
}


def layered_attention_flops(rec, loc: str, S, res):
    """Training FLOPs per token of the token mixing of a model with mixed layer kinds, from the same layer groups and
    operations the serving step model counts (`step_ops` for one prefill of S tokens): 3 × forward (backward = 2 ×
    forward), summed over the layer groups, one step line per group."""
    lay = layout_of(rec, loc)
    step = step_ops(lay, "prefill", 1, S, 0, include_lm_head=False)
    S = np.asarray(S, dtype=float)
    total = 0.0 * S
    by_group: dict[str, list] = {}
    for op in step.ops:
        if op.kind in MIXING_OPS:
            by_group.setdefault(op.group, []).append(op)
    for group, ops in by_group.items():
        term = sum(3.0 * op.flops * op.count / S for op in ops)
        total = total + term
        m = next(g for g in lay.mixers if g.name == group)
        how = "; ".join(MIXING_FORMULA.get(op.name, MIXING_FORMULA["linear"] if op.kind == "linear" else op.name)
                        for op in ops)
        shape = (f"H={m.heads}, d_qk={m.head_dim}, d_v={m.v_dim}" + (f", window={m.window}" if m.window else "")
                 + (f", ratio={m.key_ratio}" if m.key_ratio > 1 else "") + (f", top-k={m.index_topk}" if m.index_topk else "")
                 + (f", state={m.state_elements}" if m.kind == "linear" else ""))
        res.step(f"attention FLOPs / token: {group} ({m.count} layers)", "3 × forward / S: " + how,
                 f"{m.count} layers, {shape}, S = {num(first(S))}", term, "FLOP")
    res.step("attention FLOPs / token", "Σ over layer groups", " + ".join(by_group) or "no mixing layers", total, "FLOP")
    return total
