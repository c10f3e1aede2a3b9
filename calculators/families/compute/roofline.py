"""`roofline`: FLOPs and bytes of an operation or of a model step against a device's peak and bandwidth.

A model step (prefill or decode) does 2·(active matrix params)·tokens FLOPs in its linear layers,
4·heads·head_dim FLOPs per (query, key) pair in attention (QKᵀ and AV, causal pairs only), reads
every weight once per step (MoE: only the experts the batch touches) and reads the KV cache once.
Time is max(FLOPs / peak, bytes / bandwidth); which term wins is the bound.
"""
from __future__ import annotations

import math
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, StrictBool, field_validator, model_validator

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_flops, fmt_s, Fraction,
    grid_axes, GRID_FIELD, grid_shape, Lookup, NonNegFloat, NonNegFloatSweep, NonNegIntSweep, num, out, PosFloat,
    PosFloatSweep, PosInt, PosIntSweep, Profile, request_inputs, Result, whole_numbers,
)
from calculators.framework import headline as hf
from calculators.domain import (
    cache_bytes, format_bytes, FormatField as Format, FORMATS, groups_from_model, hardware_rates, intify, ledger,
    MODEL_CONFIG_FIELD, resolve_arch, resolve_format, ShapeArchitecture, shipped_weight_formats, written_bytes,
)
from calculators.perf import (
    causal_pairs, Estimate, ESTIMATE_FIELD, FRAMEWORK_FIELD, MeasuredFramework, moe_split, published_moe_split, step_estimate,
)
from calculators.families.compute._roofline_outputs import RooflineOutputs


# --------------------------------------------------------------------------- operations

class GemmOp(CalcRequest):
    kind: Literal["gemm"] = "gemm"
    m: PosIntSweep = Field(description="Rows of A and C (tokens). Sweepable.", examples=[1024])
    k: PosInt = Field(description="Reduction dimension.", examples=[4096])
    n: PosInt = Field(description="Columns of B and C.", examples=[12288])
    count: PosIntSweep = Field(1, description="Identical GEMMs (e.g. 3 SwiGLU matrices, layers). Sweepable.")
    a_bytes_per_element: NonNegFloat = Field(2, description="Bytes per element of A (0 = not counted).")
    b_bytes_per_element: NonNegFloat = Field(2, description="Bytes per element of B / the weight (0 = not counted).")
    c_bytes_per_element: NonNegFloat = Field(2, description="Bytes per element of the output C (0 = not counted).")
    tile_m: PosIntSweep | None = Field(None, description="Output-stationary tile rows: A re-read ceil(N/tile_n), B ceil(M/tile_m) times. Sweepable.")
    tile_n: PosIntSweep | None = Field(None, description="Output-stationary tile columns. Sweepable.")
    tile_k: PosInt | None = Field(None, description="K slice held on chip with the tile (for the buffer size, FP32 accumulator).")


class AttentionOp(CalcRequest):
    kind: Literal["attention"] = "attention"
    queries: PosInt = Field(description="Query positions.", examples=[8192])
    keys: PosInt = Field(description="Key positions.", examples=[8192])
    heads: PosInt = Field(1, description="Query heads.")
    kv_heads: PosInt | None = Field(None, description="Key/value heads (default = heads).")
    head_dim: PosInt = Field(description="Q/K width per head.", examples=[128])
    v_head_dim: PosInt | None = Field(None, description="V width per head (default = head_dim).")
    causal: bool = Field(False, description="Count only pairs with key ≤ query (queries are the last positions).")
    bytes_per_element: PosFloat = Field(2, description="Bytes per Q/K/V/O element.")
    count: PosIntSweep = Field(1, description="Identical instances (e.g. layers). Sweepable.")


class TensorIO(CalcRequest):
    shape: list[PosInt] = Field(min_length=1, max_length=8, description="Dimensions.", examples=[[1024, 12288]])
    bytes_per_element: PosFloat = Field(2, description="Bytes per element (BF16 = 2, FP32 = 4).")
    count: PosInt = Field(1, description="Identical tensors.")


class CustomOp(CalcRequest):
    kind: Literal["custom"] = "custom"
    flops: NonNegFloatSweep = Field(0.0, description="Arithmetic work per instance in FLOPs. Sweepable.")
    bytes: NonNegFloatSweep = Field(0.0, description="Extra bytes moved per instance, besides reads/writes. Sweepable.")
    reads: list[TensorIO] = Field(default_factory=list, max_length=50, description="Tensors read once per instance.")
    writes: list[TensorIO] = Field(default_factory=list, max_length=50, description="Tensors written once per instance.")
    count: PosIntSweep = Field(1, description="Instances (e.g. tokens, layers). Sweepable.")


Operation = Annotated[GemmOp | AttentionOp | CustomOp, Field(discriminator="kind")]


#: a KV-format sweep is short: each format is sized on its own before the points pick theirs
MAX_KV_FORMATS = 16
KvFormats = Annotated[list[Format], Field(min_length=1, max_length=MAX_KV_FORMATS)]
#: the fields a grid request spreads over axes, in axis order (model steps; operations pair their sweeps)
GRID_FIELDS = ("batch", "tokens", "context_tokens", "kv_format", "peak_flop_per_s", "memory_bandwidth_bytes_per_s")


class RooflineRequest(CalcRequest):
    """One of `operation`, `model`, `architecture`, `params`; a device by `hardware` id or explicit rates."""

    operation: Operation | None = Field(None, description="A single operation (gemm, attention or custom FLOPs/bytes).")
    model: str | None = Field(None, min_length=1, max_length=100, description="Model id in the store.", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    estimate: Estimate | None = ESTIMATE_FIELD
    framework: MeasuredFramework = FRAMEWORK_FIELD
    architecture: ShapeArchitecture | None = Field(None, description="Explicit shapes instead of a model id.")
    params: PosFloat | None = Field(None, description="Active parameters per token (no shapes: attention not counted).")
    phase: Literal["prefill", "decode"] = Field("decode", description="prefill: `tokens` prompt tokens per sequence; decode: `tokens` new tokens per sequence (1, or more for speculative verification).")
    tokens: PosIntSweep = Field(1, description="Tokens per sequence processed in this step. Sweepable.", examples=[8192])
    segments: list[PosInt] | None = Field(None, max_length=10000, description="Prefill only: packed documents with separate causal masks (replaces `tokens`).")
    batch: PosIntSweep = Field(1, description="Sequences in the step. Sweepable.", examples=[1])
    context_tokens: NonNegIntSweep = Field(0, description="Tokens already in each sequence's KV cache before the step. Sweepable.")
    weight_format: Format | None = Field(None, description="Storage format of the weights (bytes read per step). Default: the "
                                         "model's published format (per component for mixed formats), else bf16.")
    kv_format: Format | KvFormats = Field("bf16", description="Storage format of KV cache values; a list of up to "
                                          f"{MAX_KV_FORMATS} sweeps it (point by point, or as an axis with `grid`).")
    kv_bytes_per_token: NonNegFloat | None = Field(None, description="KV bytes per token (with `params`, which has no shapes).")
    include_lm_head: bool = Field(True, description="Count the output projection (decode: every token; prefill: last position only).")
    include_attention: bool = Field(True, description="Count the QKᵀ/AV pair FLOPs.")
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id (peak and bandwidth from the store).", examples=["h100-sxm"])
    precision: str = Field("BF16", max_length=10, description="Input precision of the peak row used (BF16, FP8, FP16, INT8, FP4 …).")
    sparsity: Literal["dense", "structured"] = Field("dense", description="Peak row: dense (default) or 2:4 structured sparse.")
    peak_flop_per_s: PosFloatSweep | None = Field(None, description="Explicit peak FLOP/s (instead of the hardware row). Sweepable.")
    memory_bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Explicit memory bandwidth in B/s (decimal: 3.35 TB/s = 3.35e12). Sweepable.")
    devices: PosInt = Field(1, description="Devices sharing the step evenly (ideal tensor parallel).")
    compute_efficiency: Fraction = Field(1.0, description="Achieved fraction of peak FLOP/s (MFU-like), > 0.")
    bandwidth_efficiency: Fraction = Field(1.0, description="Achieved fraction of memory bandwidth, > 0.")
    grid: StrictBool = GRID_FIELD

    @field_validator("kv_format", mode="before")
    @classmethod
    def _few_formats(cls, v):
        """A list past the cap is refused as such (the union would otherwise report why it is not one format)."""
        if isinstance(v, list) and len(v) > MAX_KV_FORMATS:
            raise ValueError(f"a list of at most {MAX_KV_FORMATS} KV formats (got {len(v)}); send the rest in another request")
        return v

    @model_validator(mode="after")
    def _check(self):
        given = [k for k in ("operation", "model", "hf_config", "architecture", "params") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of operation, model, model_config, architecture, params")
        if self.segments is not None and self.phase != "prefill":
            raise ValueError("segments apply to the prefill phase only")
        if self.grid and self.operation is not None:
            raise ValueError("grid applies to model steps; an operation pairs its swept fields point by point")
        return self


# --------------------------------------------------------------------------- helpers

#: what bounds a step, indexed by (t_c >= t_m): a sweep's labels are picked from it into a text array, which the
#: encoder writes as a list of strings
_BOUND_NAMES = np.array(["memory", "compute"])


class _FormatAxis:
    """A list of KV formats as one swept dimension: each format's figures are worked out once, and every point picks
    its own by `index` (an int array shaped like the other swept fields)."""

    def __init__(self, formats: list, index: np.ndarray):
        self.formats = formats
        self.index = index
        self._entry: dict[float, np.ndarray] = {}

    def entry_bytes(self, values: float) -> np.ndarray:
        """Bytes of one row of `values` values, in each point's format."""
        if values not in self._entry:
            self._entry[values] = np.asarray([f.entry_bytes(values) for f in self.formats])[self.index]
        return self._entry[values]

    def bytes_of(self, values) -> np.ndarray:
        """Bytes of `values` values stored as one run, in each point's format."""
        values = np.asarray(values, dtype=float)
        shape = np.broadcast_shapes(values.shape, self.index.shape)
        total = np.zeros(shape)
        for i, f in enumerate(self.formats):
            total = np.where(self.index == i, f.bytes_of(values), total)
        return total


def _kv_format(req: RooflineRequest, index: np.ndarray | None) -> tuple[object, object]:
    """(the KV format as sized: a Fmt, or a _FormatAxis for a list; its label for the measured tables, None for a
    list of several)."""
    kfmt = req.kv_format
    if not isinstance(kfmt, list):
        return resolve_format(kfmt, "kv_format"), kfmt
    formats = [resolve_format(f, f"kv_format.{i}") for i, f in enumerate(kfmt)]
    if len(formats) == 1:
        return formats[0], kfmt[0]
    return _FormatAxis(formats, index), None


def _like(x, ref):
    """`x` broadcast to the shape of `ref` (a fresh array; `x` itself when the shapes already agree)."""
    x = np.asarray(x, dtype=float)
    return x if x.shape == np.shape(ref) else x + np.zeros(np.shape(ref))


def _ratio(num_, den):
    """num / den point by point, +inf where den ≤ 0, in the broadcast shape of both."""
    num_, den = np.broadcast_arrays(np.asarray(num_, dtype=float), np.asarray(den, dtype=float))
    positive = den > 0
    if positive.all():
        return num_ / den
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(positive, num_ / np.where(positive, den, 1.0), np.inf)


def _op(req: RooflineRequest, res: Result) -> dict:
    op = req.operation
    if isinstance(op, GemmOp):
        x = broadcast({"operation.m": op.m, "operation.count": op.count,
                       "operation.tile_m": op.tile_m if op.tile_m is not None else 1,
                       "operation.tile_n": op.tile_n if op.tile_n is not None else 1})
        m, c = x["operation.m"], x["operation.count"]
        flops = 2.0 * m * op.k * op.n * c
        res.step("GEMM FLOPs", "F = 2 × M × K × N × count", f"2 × {num(first(m))} × {op.k} × {op.n} × {num(first(c))}", flops, "FLOP")
        a = op.a_bytes_per_element * m * op.k
        b = op.b_bytes_per_element * op.k * op.n
        cc = op.c_bytes_per_element * m * op.n
        extra = {"operand_bytes": {"a": out(a * c), "b": out(b * c + 0.0 * m), "c": out(cc * c)}}
        if op.tile_m is not None or op.tile_n is not None:
            tm = x["operation.tile_m"] if op.tile_m is not None else m
            tn = x["operation.tile_n"] if op.tile_n is not None else float(op.n)
            a_reads, b_reads = np.ceil(op.n / tn), np.ceil(m / tm)
            byts = (a * a_reads + b * b_reads + cc) * c
            res.step("tiled traffic", "a·M·K·⌈N/n⌉ + b·K·N·⌈M/m⌉ + c·M·N",
                     f"{num(first(a))} × {num(first(a_reads))} + {num(first(b + 0 * m))} × {num(first(b_reads))} + {num(first(cc))}",
                     byts, "B")
            extra.update(a_reads=out(a_reads + 0.0 * m), b_reads=out(b_reads + 0.0 * m))
            if op.tile_k:
                buf = op.a_bytes_per_element * tm * op.tile_k + op.b_bytes_per_element * op.tile_k * tn + 4.0 * tm * tn
                extra["tile_buffer_bytes"] = out(buf + 0.0 * m)
                res.step("tile buffer", "a·m·k + b·k·n + 4·m·n (FP32 accumulator)", f"tile {num(first(tm))}×{num(first(tn))}, k {op.tile_k}", buf, "B")
            res.assume("Output-stationary tiling: each output tile stays on chip across K; A and B tiles are re-read for every "
                       "tile that needs them, with no reuse across output tiles.")
        else:
            byts = (a + b + cc) * c
            res.step("compulsory bytes", "a·M·K + b·K·N + c·M·N (each operand once)",
                     f"{num(first(a))} + {num(first(b + 0 * m))} + {num(first(cc))}", byts, "B")
        return {"flops": flops, "bytes": byts, "extra": extra}
    if isinstance(op, AttentionOp):
        c = broadcast({"operation.count": op.count})["operation.count"]
        kvh = op.kv_heads or op.heads
        dv = op.v_head_dim or op.head_dim
        pairs = causal_pairs(op.queries, max(op.keys - op.queries, 0)) if op.causal else float(op.queries) * op.keys
        flops = 2.0 * pairs * op.heads * (op.head_dim + dv) * c
        res.step("attention FLOPs", "F = 2 × pairs × H × (d_qk + d_v)", f"2 × {num(pairs)} × {op.heads} × ({op.head_dim} + {dv})", flops, "FLOP")
        q = op.queries * op.heads * op.head_dim * op.bytes_per_element
        k = op.keys * kvh * op.head_dim * op.bytes_per_element
        v = op.keys * kvh * dv * op.bytes_per_element
        o_ = op.queries * op.heads * dv * op.bytes_per_element
        byts = (q + k + v + o_) * c
        res.step("compulsory bytes", "Q + K + V + O, each once", f"{num(q)} + {num(k)} + {num(v)} + {num(o_)}", byts, "B")
        res.assume("Attention at its compulsory traffic (fused kernel: scores never leave the chip); softmax work not counted.")
        return {"flops": flops, "bytes": byts, "extra": {"pairs": out(pairs * c / c), "score_matrix_fp32_bytes": 4.0 * pairs * op.heads}}
    # custom
    x = broadcast({"operation.flops": op.flops, "operation.bytes": op.bytes, "operation.count": op.count})
    c = x["operation.count"]
    rd = sum(math.prod(t.shape) * t.bytes_per_element * t.count for t in op.reads)
    wr = sum(math.prod(t.shape) * t.bytes_per_element * t.count for t in op.writes)
    byts = (rd + wr + x["operation.bytes"]) * c
    flops = x["operation.flops"] * c
    res.step("bytes moved", "(reads + writes + extra) × count", f"({num(rd)} + {num(wr)} + {num(first(x['operation.bytes']))}) × {num(first(c))}", byts, "B")
    if np.any(flops):
        res.step("FLOPs", "F × count", f"{num(first(x['operation.flops']))} × {num(first(c))}", flops, "FLOP")
    return {"flops": flops, "bytes": byts, "extra": {"read_bytes": out(rd * c), "write_bytes": out(wr * c)}}


def _model(req: RooflineRequest, lookup: Lookup, res: Result, axes: tuple[str, ...] | None) -> dict:
    named = {"tokens": req.tokens, "batch": req.batch, "context_tokens": req.context_tokens}
    if isinstance(req.kv_format, list) and len(req.kv_format) > 1:
        named["kv_format"] = np.arange(len(req.kv_format))        # which format each point uses
    x = broadcast(named, axes=axes)
    if req.segments is not None:
        seg = np.asarray(req.segments, dtype=float)
        p = np.asarray(float(seg.sum())) + 0.0 * x["batch"]
        s = 0.0 * x["context_tokens"]
        if np.any(x["context_tokens"]) or (isinstance(req.tokens, list) or req.tokens != 1):
            raise CalcInputError("segments", "segments replace tokens and context_tokens; leave those at their defaults")
        pairs_seq = np.asarray(float(np.sum(seg * (seg + 1) / 2))) + 0.0 * p
    else:
        p, s = x["tokens"], x["context_tokens"]
        pairs_seq = None
    b = x["batch"]
    if "kv_format" in x and axes is None:
        b = b + 0 * x["kv_format"]           # formats paired point by point: every per-point output spans them
    n_tok = p * b
    kfmt, kv_label = _kv_format(req, x["kv_format"].astype(np.intp) if "kv_format" in x else None)
    arch, rec = resolve_arch(req, lookup, res)
    shipped = shipped_weight_formats((rec.weight_dtype if rec is not None else None)) if req.weight_format is None else None
    wfmt = req.weight_format if req.weight_format is not None else (shipped.main if shipped else "bf16")
    if req.weight_format is None:
        res.assume(f"Weight format: as published, {shipped.label} ({shipped.note}); pass `weight_format` to change it."
                   if shipped else "Weight format: bf16 (no published format known); pass `weight_format` to change it.")
    expert_fmt = shipped.for_component("routed_experts") if shipped else wfmt
    o: dict = {}
    groups = rec.layer_groups if rec else None
    if arch is not None:
        led = ledger(arch)
        am = led["active_matrix"]
        active = led["active_matrix_total"]
        lin = 2.0 * active * n_tok
        res.step("linear FLOPs", "F_lin = 2 × N_matrix × tokens × batch",
                 f"2 × {num(active)} × {num(first(p))} × {num(first(b))}", lin, "FLOP")
        logit_tok = n_tok if req.phase == "decode" else b + 0.0 * p
        head = 2.0 * led["head_matrix"] * logit_tok if req.include_lm_head else 0.0 * lin
        if req.include_lm_head and arch.vocab:
            res.step("LM head FLOPs", "2 × V × d × positions needing logits", f"2 × {arch.vocab} × {arch.d} × {num(first(logit_tok))}", head, "FLOP")
        # attention pairs per layer group (windows honoured when the record has them)
        per_pair_layer = 2.0 * arch.heads * (arch.qk_dim + arch.vo_dim)
        windows = [(int(g.get("count", 0)), (g.get("streams") or [{}])[0].get("window")) for g in groups] if groups else [(arch.layers, None)]
        pr0 = pairs_seq if pairs_seq is not None else causal_pairs(p, s)       # per sequence, no window
        pairs_total = _like(pr0 * b, lin)
        attn = 0.0 * lin
        for cnt, w in windows:
            pr = pr0 if (pairs_seq is not None or w is None) else causal_pairs(p, s, w)
            attn = attn + pr * b * (per_pair_layer * cnt)
        if not req.include_attention:
            attn = 0.0 * attn
        else:
            res.step("attention FLOPs", "F_attn = pairs × batch × 2·H·(d_qk + d_v) × L; pairs = P·S + P(P+1)/2",
                     f"{num(first(pr0))} × {num(first(b))} × {num(per_pair_layer)} × {arch.layers}", attn, "FLOP")
        flops = lin + head + attn
        # bytes: weights once per step; MoE experts that the batch touches
        comp = led["components"]
        non_expert = comp["attention"] + comp["dense_ffn"] + comp["shared_experts"] + comp["router"] + comp["norms"] \
            + (comp["lm_head"] if not arch.tied else comp["embeddings"]) * (1 if req.include_lm_head else 0)
        w_bytes = float(format_bytes(non_expert, wfmt)) + 0.0 * n_tok
        if arch.experts:
            touched = arch.experts * (1.0 - (1.0 - arch.top_k / arch.experts) ** n_tok)
            exp_bytes = touched * arch.moe_layers * float(format_bytes(led["per_layer"]["expert"], expert_fmt))
            w_bytes = w_bytes + exp_bytes
            o["experts_touched_per_layer"] = out(touched)
            res.assume("MoE: with uniform routing a step touches E·(1 − (1 − k/E)^tokens) distinct experts per layer; only those are read.")
        kv_vals_tok = arch.kv_values_per_token() * arch.layers
        # whole by construction (integer shapes × whole token counts): JSON integers, with no per-point check
        o.update(linear_flops=whole_numbers(lin), lm_head_flops=whole_numbers(head), attention_flops=whole_numbers(attn),
                 causal_pairs=whole_numbers(pairs_total))
        o["linear_flops_by_component"] = {k: whole_numbers((2.0 * v) * n_tok) for k, v in am.items()}
    else:
        if req.params is not None:
            active, total_params = req.params, req.params
        else:
            active = float(rec.value("params_active", loc="model"))
            total_params = float(rec.value("params_total", loc="model"))
            res.cite(rec.source("params_active"))
            res.cite(rec.source("params_total"))
            res.assume(f"{rec.id}'s attention ('{rec.attention}') is not itemised here: linear FLOPs use the stored "
                       "active parameter count and attention pair FLOPs are not counted.")
        flops = 2.0 * active * n_tok
        res.step("FLOPs", "F = 2 × N_active × tokens × batch", f"2 × {num(active)} × {num(first(p))} × {num(first(b))}", flops, "FLOP")
        split = moe_split(rec) if rec else None
        if split:
            per_exp, moe_layers, e, k = split
            routed = per_exp * moe_layers * e
            if routed >= total_params:
                split = published_moe_split(rec, res, active, total_params, moe_layers, e, k, routed)
        if split:
            per_exp, moe_layers, e, k = split
            routed = per_exp * moe_layers * e
            touched = e * (1.0 - (1.0 - k / e) ** n_tok)
            # the routed experts read in their own published format (MXFP4 beside BF16, say), the rest in the main one
            w_bytes = float(format_bytes(total_params - routed, wfmt)) \
                + format_bytes(touched * moe_layers * per_exp, expert_fmt)
            o["experts_touched_per_layer"] = out(touched)
        else:
            w_bytes = format_bytes(total_params + 0.0 * n_tok, wfmt)
        o.update(linear_flops=intify(flops), attention_flops=0, lm_head_flops=0)
        kv_vals_tok = None
        if req.params is not None:
            res.assume("An explicit parameter count: attention pair FLOPs are not counted; all weights are read once per step.")
    res.step("weight bytes read", "W = weights read once per step", fmt_bytes(first(w_bytes)), w_bytes, "B")

    # KV: read the cached history once, write the new tokens
    if groups:
        # the architecture engine sizes the cache exactly as kv-cache does (blocks per entry, windows, ratios, state)
        gspec = groups_from_model(rec, res, "model")
        kf, sf = kfmt, FORMATS["fp32"]
        kv_read = cache_bytes(gspec, kf, sf, s) * b
        kv_after = cache_bytes(gspec, kf, sf, s + p) * b
        kv_write = written_bytes(gspec, kf, sf, s, p) * b
        vals_hist = None
        if any(g.state_elements for g in gspec):
            res.assume("Recurrent state (FP32) is read and written once per step.")
    elif kv_vals_tok is not None:
        vals_hist, vals_after, state = kv_vals_tok * s, kv_vals_tok * (s + p), 0.0
        vals_new = kv_vals_tok * p
    elif not groups:
        per_tok = req.kv_bytes_per_token or 0.0
        vals_hist = vals_after = None
        kv_read = per_tok * s * b
        kv_write = per_tok * p * b
        kv_after = per_tok * (s + p) * b
        state = 0.0
    if vals_hist is not None and not groups:
        kv_read = kfmt.bytes_of(vals_hist) * b
        kv_after = kfmt.bytes_of(vals_after) * b
        kv_write = kfmt.bytes_of(vals_new) * b
        if state:
            st = format_bytes(state, "fp32") * b
            kv_read = kv_read + st
            kv_write = kv_write + st
            res.assume("Recurrent state (FP32) is read and written once per step.")
    res.step("KV bytes", "read history + write new entries", f"{fmt_bytes(first(kv_read))} + {fmt_bytes(first(kv_write))}",
             kv_read + kv_write, "B")
    byts = w_bytes + kv_read + kv_write
    o.update(weight_bytes=intify(w_bytes), kv_read_bytes=intify(kv_read), kv_write_bytes=intify(kv_write),
             kv_cache_bytes=intify(kv_after), tokens_in_step=whole_numbers(n_tok))
    res.assume("Activations, norms, softmax and sampling work and traffic are not counted.",
               "Embedding lookups read only the rows used; the embedding table is not counted as read (unless tied with the head).")
    return {"flops": flops, "bytes": byts, "extra": o, "tokens": n_tok, "arch": arch, "shape": (p, s, b), "weight_format": wfmt,
            "kv_label": kv_label}


def _check_sweeps(req: RooflineRequest, axes: tuple[str, ...] | None) -> None:
    """Every swept field of the request (work and rates) must pair up: a mismatch is a 422 naming the field (a grid
    request has no pairs to check: each list is its own axis)."""
    if axes is not None:
        return
    named: dict = {}
    op = req.operation
    if op is not None:
        for k in ("m", "count", "tile_m", "tile_n", "flops", "bytes"):
            v = getattr(op, k, None)
            if v is not None:
                named[f"operation.{k}"] = v
    else:
        named.update(tokens=req.tokens, batch=req.batch, context_tokens=req.context_tokens)
        if isinstance(req.kv_format, list) and len(req.kv_format) > 1:
            named["kv_format"] = range(len(req.kv_format))
    for k in ("peak_flop_per_s", "memory_bandwidth_bytes_per_s"):
        if getattr(req, k) is not None:
            named[k] = getattr(req, k)
    broadcast(named)


def compute(req: RooflineRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    axes = grid_axes(req, GRID_FIELDS)
    _check_sweeps(req, axes)
    work = _op(req, res) if req.operation is not None else _model(req, lookup, res, axes)
    peak, bw, _ = hardware_rates(req, lookup, res, optional_peak=True)
    rates = broadcast({"peak_flop_per_s": peak if peak is not None else 1.0,
                       "memory_bandwidth_bytes_per_s": bw if bw is not None else 1.0}, axes=axes)
    flops, byts = np.broadcast_arrays(np.asarray(work["flops"], dtype=float), np.asarray(work["bytes"], dtype=float))
    if req.compute_efficiency <= 0 or req.bandwidth_efficiency <= 0:
        raise CalcInputError("compute_efficiency" if req.compute_efficiency <= 0 else "bandwidth_efficiency", "must be > 0")
    if axes:     # a grid: each in its own (broadcastable) shape
        o = {"flops": intify(work["flops"]), "bytes": intify(work["bytes"])}
    else:
        o = {"flops": intify(flops), "bytes": intify(byts)}
    ai = _ratio(flops, byts)
    o["arithmetic_intensity"] = out(ai)
    res.step("arithmetic intensity", "I = F / bytes", f"{fmt_flops(first(flops))} / {fmt_bytes(first(byts))}", ai, "FLOP/B")
    t_c = t_m = None
    if peak is not None:
        eff_peak = rates["peak_flop_per_s"] * req.devices * req.compute_efficiency
        t_c = flops / eff_peak
        res.step("compute time", "t_c = F / (peak × devices × efficiency)", f"{fmt_flops(first(flops))} / {num(first(eff_peak) / 1e12)} TFLOP/s", t_c, "s")
        o["compute_time_s"] = out(t_c)
    if bw is not None:
        eff_bw = rates["memory_bandwidth_bytes_per_s"] * req.devices * req.bandwidth_efficiency
        t_m = byts / eff_bw
        res.step("memory time", "t_m = bytes / (bandwidth × devices × efficiency)", f"{fmt_bytes(first(byts))} / {num(first(eff_bw) / 1e9)} GB/s", t_m, "s")
        o["memory_time_s"] = out(t_m)
    if t_c is not None and t_m is not None:
        t = np.maximum(t_c, t_m)
        bound = _BOUND_NAMES.take(np.asarray(t_c >= t_m).view(np.int8))
        ridge = rates["peak_flop_per_s"] / rates["memory_bandwidth_bytes_per_s"] * (req.compute_efficiency / req.bandwidth_efficiency)
        res.step("ridge point", "I* = peak / bandwidth", f"{num(first(rates['peak_flop_per_s']) / 1e12)} T / {num(first(rates['memory_bandwidth_bytes_per_s']) / 1e9)} G",
                 ridge, "FLOP/B")
        # a sweep's labels stay a (text) array until the wire, like every other output
        o.update(ridge_point=out(_like(ridge, t)), bound=bound if np.ndim(bound) else str(bound))
    elif t_c is not None or t_m is not None:
        t = t_c if t_c is not None else t_m
        o["bound"] = None
        res.assume("Only one of peak and bandwidth is known: time is that term alone and no bound is named.")
    else:
        t = None
        o["bound"] = None
    if t is not None:
        o["time_s"] = out(t)
        res.step("step time", "t = max(t_c, t_m) (perfect overlap)", fmt_s(first(t)), t, "s")
        if "tokens" in work:
            o["tokens_per_s"] = out(_ratio(work["tokens"], t))
    o.update(work["extra"])
    res.assume("Compute and memory traffic overlap perfectly (the roofline's ideal lower bound on time).")
    if "shape" in work and t is not None and req.segments is None:
        o.update(_measured(req, lookup, res, work, t, axes))
    elif req.estimate == "measured":
        raise CalcInputError("estimate", "a measured estimate needs a model step (model or model_config, with hardware)")
    if axes:
        # a grid's outputs keep the axes they depend on (broadcastable to the grid); the answer spreads them
        shape = grid_shape(req, axes)
        res.grid_shape = shape
        o.update(grid_axes=list(axes), grid_shape=list(shape))
        res.assume(f"Grid: every combination of {', '.join(axes)} ({' × '.join(map(str, shape))} = "
                   f"{math.prod(shape):,} points); outputs are nested arrays in that axis order.")
    res.outputs = o
    res.headline = _headline(req, o)
    return res


def _measured(req: RooflineRequest, lookup: Lookup, res: Result, work: dict, t, axes) -> dict:
    """The measured estimate of a model step beside its bound (one KV format per request: the tables are per format)."""
    if work["kv_label"] is None:
        if req.estimate == "measured":
            raise CalcInputError("kv_format", "a measured estimate is looked up for one KV format: send one kv_format "
                                 "per request, or estimate='bound'")
        if req.estimate is None or req.estimate == "both":
            res.assume("No measured estimate: the measured kernels are looked up for one KV format at a time; send one "
                       "kv_format per request for it.")
        return {}
    p, s, b = work["shape"]
    shape = np.broadcast_shapes(np.shape(p), np.shape(s), np.shape(b), np.shape(t))
    if len(shape) > 1:       # a grid: the tables are read point by point over the flattened grid, then reshaped
        p, s, b, t = (np.broadcast_to(v, shape).ravel() for v in (p, s, b, t))
    est = step_estimate(req, lookup, res, arch=work["arch"], hardware_id=req.hardware, phase=req.phase, batch=b,
                        tokens=p, context_tokens=s, tp=req.devices, weight_format=work["weight_format"],
                        kv_format=work["kv_label"], bound_s=t, framework=req.framework)
    if len(shape) > 1:
        est = _reshaped(est, shape)
    return est


def _reshaped(x, shape: tuple[int, ...]):
    """Flat arrays in an output tree put back into the grid's shape."""
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.size == math.prod(shape):
        return x.reshape(shape)
    if isinstance(x, dict):
        return {k: _reshaped(v, shape) for k, v in x.items()}
    return x


def _headline(req: RooflineRequest, o: dict) -> str:
    """Step time, what bounds it and the throughput (a sweep: its first point)."""
    n = hf.n_points(*(o.get(k) for k in ("flops", "bytes", "time_s")), req.tokens, req.batch, req.context_tokens,
                    req.peak_flop_per_s, req.memory_bandwidth_bytes_per_s, req.kv_format)
    if o.get("grid_shape"):
        n = math.prod(o["grid_shape"])
    if req.operation is not None:
        what = f"The {req.operation.kind} operation"
    else:
        who = req.model or ("the configured model" if req.hf_config is not None else "the model")
        what = (f"A {req.phase} step of {who} (batch {hf.fmt_count(req.batch)}; {hf.fmt_count(req.tokens)} "
                f"{'token' if hf.scalar(req.tokens) == 1 else 'tokens'} per sequence; {hf.fmt_count(req.context_tokens)} in context)")
    where = f" on {hf.fmt_count(req.devices)} × {req.hardware}" if req.hardware and req.devices > 1 else \
        (f" on {req.hardware}" if req.hardware else "")
    work = (f"{hf.fmt_flops(o.get('flops'))} over {hf.fmt_bytes(o.get('bytes'))}, "
            f"{hf.fmt_num(o.get('arithmetic_intensity'))} FLOP/B")
    if o.get("time_s") is None:
        text = f"{what} does {work}{where}"
    else:
        bound = hf.first_value(o.get("bound"))
        text = (f"{what}{where} takes at least {hf.fmt_seconds(o['time_s'])}"
                + (f", {bound}-bound" if bound else "") + f" ({work}"
                + (f" against a ridge of {hf.fmt_num(o.get('ridge_point'))}" if o.get("ridge_point") is not None else "") + ")")
        if o.get("tokens_per_s") is not None:
            text += f": {hf.fmt_num(o['tokens_per_s'])} tokens/s"
        if o.get("measured_time_s") is not None:
            text += f"; measured kernels estimate {hf.fmt_seconds(o['measured_time_s'])}"
    if n > 1:
        grid = o.get("grid_shape")
        text += f" (first of {n:,} points" + (f", a {' × '.join(map(str, grid))} grid)" if grid else ")")
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="roofline",
        profile=Profile(3.2e-06, 1444, 629),
        mcp_tool=True,
        family="roofline",
        title="Roofline of an operation or a model step",
        summary="FLOPs and bytes of a GEMM, an attention block, a custom operation, or a model's prefill/decode step, "
                "against a device's precision-matched dense peak and memory bandwidth: time, bound, intensity vs ridge.",
        description="Model step: F = 2·N_matrix·tokens·batch (+ LM head for positions needing logits) + pairs·batch·"
                    "2·H·(d_qk+d_v)·L with causal pairs P·S + P(P+1)/2 (segments: Σ L_i(L_i+1)/2). Bytes = weights "
                    "read once per step (MoE: expected distinct experts touched) + KV history read + new KV written. "
                    "t = max(F/peak, bytes/bandwidth). Ideal overlap, no activations, no kernel overheads.",
        request_model=RooflineRequest,
        compute=compute,
        outputs_model=RooflineOutputs,
        example={"model": "qwen3-8b", "phase": "decode", "batch": [1, 8, 64, 256], "context_tokens": 4096,
                 "hardware": "h100-sxm", "precision": "BF16"},
        cases=("model-resource-accounting", "buffer-capacity-and-data-movement", "retrieval-and-generation",
               "attention-tiles-and-io", "macbook-rtx-pro6000"),
        sweepable=("tokens", "batch", "context_tokens", "kv_format", "peak_flop_per_s", "memory_bandwidth_bytes_per_s",
                   "operation.m", "operation.count", "operation.tile_m", "operation.tile_n", "operation.flops", "operation.bytes"),
        grid=GRID_FIELDS,
        chart=Chart(x="batch", y=("compute_time_s", "memory_time_s"), x_label="batch (sequences)", y_label="seconds per step"),
        extra_examples=({"operation": {"kind": "gemm", "m": 1024, "k": 4096, "n": 12288}, "peak_flop_per_s": 989e12,
                         "memory_bandwidth_bytes_per_s": 3.35e12},),
    ),


]
