"""Weight memory: parameters and bytes of a model, per storage format, and how they fit on devices.

Three ways to describe what is stored:
- `model` (store id) or `architecture` (explicit shapes): parameters counted matrix by matrix
  (attention projections for MHA/GQA/MLA, SwiGLU FFN, MoE experts + shared experts + router,
  embeddings and LM head with the tie flag, RMSNorm vectors);
- `params`: an explicit parameter count (e.g. a model's size label), sweepable;
- `tensors`: a list of named tensor shapes (one layer's matrices, a buffer, an index), repeated
  `copies` times.

The module also holds the shared helpers that the roofline, training-compute, checkpoint and
serving-cost calculators use: storage formats and the per-component parameter ledger.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from calculators.core import (
    CalcInputError,
    CalcRequest,
    Lookup,
    NonNegInt,
    PosFloatSweep,
    PosInt,
    PosIntSweep,
    Result,
    broadcast,
    fact_source,
    fact_value,
    fetch,
    first,
    fmt_bytes,
    num,
    out,
)
from calculators.base import Calculator, Chart

# --------------------------------------------------------------------------- storage formats

#: name -> (bits per value, values per scale group (0 = none), bytes per group scale)
FORMATS: dict[str, tuple[float, int, float]] = {
    "fp32": (32, 0, 0.0),
    "bf16": (16, 0, 0.0),
    "fp16": (16, 0, 0.0),
    "fp8": (8, 0, 0.0),
    "int8": (8, 0, 0.0),
    "mxfp8": (8, 32, 1.0),
    "q8_0": (8, 32, 2.0),
    "int4": (4, 0, 0.0),
    "fp4": (4, 0, 0.0),
    "int4_g128": (4, 128, 2.0),
    "q4_0": (4, 32, 2.0),
    "mxfp4": (4, 32, 1.0),
    "nvfp4": (4, 16, 1.0),
}
FormatName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "mxfp8", "q8_0", "int4", "fp4", "int4_g128",
                     "q4_0", "mxfp4", "nvfp4"]
FORMAT_NOTES = {
    "int4": "ideal 4 bits per value, no scales", "fp4": "ideal 4 bits per value, no scales",
    "int4_g128": "4 bits + one 2-byte scale per 128 values", "q4_0": "4 bits + one 2-byte scale per 32 values",
    "mxfp4": "4 bits + one 1-byte (E8M0) scale per 32 values",
    "nvfp4": "4 bits + one 1-byte (E4M3) scale per 16 values; the per-tensor global scale is ignored",
    "mxfp8": "8 bits + one 1-byte scale per 32 values", "q8_0": "8 bits + one 2-byte scale per 32 values",
    "fp8": "8 bits per value; per-tensor or per-block scales ignored",
}


class CustomFormat(CalcRequest):
    """A storage format given by its bits: `bits_per_value` plus an optional scale per group."""

    bits_per_value: float = Field(gt=0, le=256, description="Bits per stored value (16 = BF16, 4 = 4-bit).", examples=[4])
    group_size: NonNegInt = Field(0, description="Values sharing one scale; 0 = no group scales.", examples=[128])
    scale_bytes_per_group: float = Field(0.0, ge=0, le=1024, description="Bytes of scale/zero-point metadata per group.", examples=[2])


Format = FormatName | CustomFormat


def format_spec(fmt: Format) -> tuple[float, int, float]:
    if isinstance(fmt, CustomFormat):
        return fmt.bits_per_value, fmt.group_size, fmt.scale_bytes_per_group
    return FORMATS[fmt]


def format_label(fmt: Format) -> str:
    if isinstance(fmt, CustomFormat):
        g = f" + {num(fmt.scale_bytes_per_group)} B per {fmt.group_size} values" if fmt.group_size else ""
        return f"{num(fmt.bits_per_value)}-bit{g}"
    return fmt


def bits_per_param(fmt: Format) -> float:
    """Average bits per value including group scales."""
    bits, group, scale = format_spec(fmt)
    return bits + (scale * 8.0 / group if group else 0.0)


def format_bytes(values, fmt: Format):
    """Bytes to store `values` values (array-friendly): payload + ceil(values / group) scales."""
    bits, group, scale = format_spec(fmt)
    v = np.asarray(values, dtype=float)
    payload = v * bits / 8.0
    if group:
        payload = payload + np.ceil(v / group) * scale
    return payload


# --------------------------------------------------------------------------- architecture

# Shape bounds: far above any published model (hidden 7,168, vocab 262,144, 61 layers, 384 experts ...), low
# enough that a layer's matrices stay countable. Declared inside the type, where pydantic enforces them.
Layers = Annotated[int, Field(ge=1, le=10**5)]
Width = Annotated[int, Field(ge=1, le=10**7)]
OptWidth = Annotated[int, Field(ge=0, le=10**7)]
HeadCount = Annotated[int, Field(ge=0, le=10**5)]
HeadDim = Annotated[int, Field(ge=0, le=10**6)]
PosHeadDim = Annotated[int, Field(ge=1, le=10**6)]
Vocab = Annotated[int, Field(ge=0, le=10**8)]
ExpertCount = Annotated[int, Field(ge=1, le=10**6)]


def exact(x):
    """Python ints as JSON integers while float64 holds them exactly, floats beyond (JSON integers stop at 64 bits,
    and a parameter count past 2^53 is far outside any model); recurses into dicts and lists."""
    if isinstance(x, bool):
        return x
    if isinstance(x, int):
        return x if abs(x) < 2**53 else float(x)
    if isinstance(x, dict):
        return {k: exact(v) for k, v in x.items()}
    if isinstance(x, list):
        return [exact(v) for v in x]
    return x


class MoESpec(CalcRequest):
    experts: ExpertCount = Field(description="Routed experts per MoE layer (at most 1e6).", examples=[128])
    experts_per_token: ExpertCount = Field(description="Routed experts each token uses.", examples=[8])
    shared_experts: Annotated[int, Field(ge=0, le=10**4)] = Field(0, description="Always-active shared experts per MoE layer.")
    expert_ffn_size: Width = Field(description="Intermediate width of one expert (SwiGLU).", examples=[1536])
    dense_layers: Annotated[int, Field(ge=0, le=10**5)] = Field(0, description="Leading layers with a dense FFN (width `ffn_size`) instead of experts.")


class MLASpec(CalcRequest):
    kv_lora_rank: Width = Field(description="Latent width of the compressed KV.", examples=[512])
    q_lora_rank: OptWidth = Field(0, description="Latent width of the compressed query; 0 = full-rank query projection.")
    qk_rope_head_dim: HeadDim = Field(64, description="Decoupled RoPE key/query width per head.")
    qk_nope_head_dim: PosHeadDim = Field(128, description="Non-RoPE query/key width per head.")
    v_head_dim: PosHeadDim = Field(128, description="Value width per head.")


class ShapeArchitecture(CalcRequest):
    """Explicit transformer shapes (the same names as the store's model records)."""

    layers: Layers = Field(description="Transformer layers (at most 1e5).", examples=[36])
    hidden_size: Width = Field(description="Model width d (at most 1e7).", examples=[4096])
    heads: HeadCount = Field(0, description="Query heads (0 = no attention projections counted).", examples=[32])
    kv_heads: HeadCount = Field(0, description="Key/value heads (GQA); defaults to `heads`.", examples=[8])
    head_dim: HeadDim = Field(0, description="Width per head; defaults to hidden_size / heads.", examples=[128])
    ffn_size: OptWidth = Field(0, description="Dense FFN intermediate width (0 = none).", examples=[12288])
    vocab_size: Vocab = Field(0, description="Vocabulary (0 = no embeddings / head counted, at most 1e8).", examples=[151936])
    tie_word_embeddings: bool = Field(False, description="Input embedding and LM head share one matrix.")
    qk_norm: bool = Field(False, description="Per-head RMSNorm on queries and keys (Qwen3): 2 x head_dim values per layer.")
    ffn_matrices: int = Field(3, ge=2, le=3, description="Matrices per FFN/expert: 3 for SwiGLU (gate, up, down), 2 for a plain MLP.")
    attention: Literal["mha", "gqa", "mla"] = Field("gqa", description="Attention projection family.")
    moe: MoESpec | None = None
    mla: MLASpec | None = None


@dataclass
class Arch:
    """Shapes as plain ints (from a request or a store record)."""

    layers: int
    d: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    tied: bool
    qk_norm: bool
    ffn_matrices: int
    attention: str
    experts: int = 0
    top_k: int = 0
    shared: int = 0
    expert_ffn: int = 0
    dense_layers: int = 0
    kv_lora: int = 0
    q_lora: int = 0
    rope_dim: int = 0
    nope_dim: int = 0
    v_dim: int = 0
    name: str = "architecture"

    @property
    def moe_layers(self) -> int:
        return max(self.layers - self.dense_layers, 0) if self.experts else 0

    @property
    def dense_ffn_layers(self) -> int:
        return self.layers - self.moe_layers

    @property
    def qk_dim(self) -> int:
        return self.nope_dim + self.rope_dim if self.attention == "mla" else self.head_dim

    @property
    def vo_dim(self) -> int:
        return self.v_dim if self.attention == "mla" else self.head_dim

    def kv_values_per_token(self) -> int:
        """Cached values per token per layer (K and V, or the MLA latent + rope key)."""
        if self.attention == "mla":
            return self.kv_lora + self.rope_dim
        return 2 * self.kv_heads * self.head_dim


def arch_from_request(a: ShapeArchitecture) -> Arch:
    heads = a.heads
    head_dim = a.head_dim or (a.hidden_size // heads if heads else 0)
    kv = a.kv_heads or heads
    arch = Arch(layers=a.layers, d=a.hidden_size, heads=heads, kv_heads=kv, head_dim=head_dim, ffn=a.ffn_size,
                vocab=a.vocab_size, tied=a.tie_word_embeddings, qk_norm=a.qk_norm, ffn_matrices=a.ffn_matrices,
                attention=a.attention)
    if a.moe:
        if a.moe.experts_per_token > a.moe.experts:
            raise CalcInputError("architecture.moe.experts_per_token", "cannot exceed `experts`")
        if a.moe.dense_layers > a.layers:
            raise CalcInputError("architecture.moe.dense_layers", "cannot exceed `layers`")
        arch.experts, arch.top_k, arch.shared = a.moe.experts, a.moe.experts_per_token, a.moe.shared_experts
        arch.expert_ffn, arch.dense_layers = a.moe.expert_ffn_size, a.moe.dense_layers
    if a.attention == "mla":
        if not a.mla:
            raise CalcInputError("architecture.mla", "attention 'mla' needs the `mla` shapes")
        arch.kv_lora, arch.q_lora, arch.rope_dim = a.mla.kv_lora_rank, a.mla.q_lora_rank, a.mla.qk_rope_head_dim
        arch.nope_dim, arch.v_dim = a.mla.qk_nope_head_dim, a.mla.v_head_dim
    return arch


SHAPE_FIELDS = ("layers", "hidden_size", "heads", "kv_heads", "head_dim", "vocab_size")


def arch_from_record(rec: dict, res: Result | None, loc: str = "model", qk_norm: bool | None = None) -> Arch | None:
    """Shapes of a store model record, or None when its attention family has no projection ledger here."""
    kind = str(rec.get("attention", "")).lower()
    if kind not in ("mha", "gqa", "mla"):
        return None
    v = {f: fact_value(rec, f, loc=loc) for f in SHAPE_FIELDS}
    ffn = fact_value(rec, "ffn_size", required=False) or 0
    arch = Arch(layers=int(v["layers"]), d=int(v["hidden_size"]), heads=int(v["heads"]), kv_heads=int(v["kv_heads"]),
                head_dim=int(v["head_dim"]), ffn=int(ffn), vocab=int(v["vocab_size"]),
                tied=bool(rec.get("tie_word_embeddings", False)),
                qk_norm=bool(rec.get("qk_norm", False)) if qk_norm is None else qk_norm,
                ffn_matrices=3, attention=kind, name=rec.get("id", "model"))
    cited = list(SHAPE_FIELDS) + (["ffn_size"] if ffn else [])
    if rec.get("moe"):
        arch.experts = int(fact_value(rec, "moe", "experts", loc=loc))
        arch.top_k = int(fact_value(rec, "moe", "experts_per_token", loc=loc))
        arch.shared = int(fact_value(rec, "moe", "shared_experts", required=False) or 0)
        arch.expert_ffn = int(fact_value(rec, "moe", "expert_ffn_size", loc=loc))
        arch.dense_layers = int(fact_value(rec, "moe", "dense_layers", required=False) or 0)
        cited += ["moe.experts", "moe.experts_per_token", "moe.shared_experts", "moe.expert_ffn_size", "moe.dense_layers"]
        if arch.dense_layers and not arch.ffn:
            raise CalcInputError(loc, f"{arch.name} has dense layers but no sourced ffn_size")
    if kind == "mla":
        if not rec.get("mla"):
            raise CalcInputError(loc, f"{arch.name} is MLA but has no sourced mla shapes")
        arch.kv_lora = int(fact_value(rec, "mla", "kv_lora_rank", loc=loc))
        arch.q_lora = int(fact_value(rec, "mla", "q_lora_rank", required=False) or 0)
        arch.rope_dim = int(fact_value(rec, "mla", "qk_rope_head_dim", required=False) or 0)
        arch.nope_dim = int(fact_value(rec, "mla", "qk_nope_head_dim", required=False) or (arch.head_dim - arch.rope_dim))
        arch.v_dim = int(fact_value(rec, "mla", "v_head_dim", required=False) or arch.head_dim)
        cited += ["mla.kv_lora_rank", "mla.q_lora_rank", "mla.qk_rope_head_dim", "mla.qk_nope_head_dim", "mla.v_head_dim"]
    if res is not None:
        for f in cited:
            res.cite(fact_source(rec, *f.split(".")))
    return arch


COMPONENTS = ("attention", "dense_ffn", "routed_experts", "shared_experts", "router", "norms", "embeddings", "lm_head")


def ledger(a: Arch) -> dict:
    """Parameter counts per component (whole model), per layer, and per token (active)."""
    d, L = a.d, a.layers
    if a.attention == "mla":
        q = (d * a.q_lora + a.q_lora + a.q_lora * a.heads * a.qk_dim) if a.q_lora else d * a.heads * a.qk_dim
        attn_layer = q + d * (a.kv_lora + a.rope_dim) + a.kv_lora + a.kv_lora * a.heads * (a.nope_dim + a.v_dim) \
            + a.heads * a.v_dim * d
        attn_matrix_layer = attn_layer - a.kv_lora - a.q_lora  # norm vectors inside MLA
    else:
        attn_layer = d * a.heads * a.head_dim + 2 * d * a.kv_heads * a.head_dim + a.heads * a.head_dim * d
        attn_matrix_layer = attn_layer
    expert = a.ffn_matrices * d * a.expert_ffn
    dense_ffn_layer = a.ffn_matrices * d * a.ffn
    norms_layer = 2 * d + (2 * a.qk_dim if a.qk_norm and a.heads else 0)
    comp = {
        "attention": attn_layer * L,
        "dense_ffn": dense_ffn_layer * a.dense_ffn_layers,
        "routed_experts": expert * a.experts * a.moe_layers,
        "shared_experts": expert * a.shared * a.moe_layers,
        "router": d * a.experts * a.moe_layers,
        "norms": norms_layer * L + d,
        "embeddings": a.vocab * d,
        "lm_head": 0 if a.tied else a.vocab * d,
    }
    # matrices that multiply every token (forward FLOPs = 2 x these per token)
    active_matrix = {
        "attention": attn_matrix_layer * L,
        "dense_ffn": comp["dense_ffn"],
        "routed_experts": expert * a.top_k * a.moe_layers,
        "shared_experts": comp["shared_experts"],
        "router": comp["router"],
    }
    head_matrix = a.vocab * d  # the output projection multiplies every token that needs logits (tied or not)
    return exact({
        "components": comp,
        "total": sum(comp.values()),
        "core_matrix": active_matrix["attention"] + comp["dense_ffn"] + comp["routed_experts"] + comp["shared_experts"]
        + comp["router"],
        "active_matrix": active_matrix,
        "active_matrix_total": sum(active_matrix.values()),
        "head_matrix": head_matrix,
        "active_total": sum(active_matrix.values()) + comp["norms"] + comp["embeddings"] + comp["lm_head"]
        + (comp["attention"] - active_matrix["attention"]),
        "per_layer": {"attention": attn_layer, "dense_ffn": dense_ffn_layer if a.ffn else 0,
                      "expert": expert, "norms": norms_layer},
    })


def resolve_arch(req, lookup: Lookup, res: Result, qk_norm: bool | None = None) -> tuple[Arch | None, dict | None]:
    """The Arch of a request's `model` id or `architecture`; (None, record) when only labels are known."""
    if getattr(req, "architecture", None) is not None:
        return arch_from_request(req.architecture), None
    if getattr(req, "model", None):
        rec = fetch(lookup, "model", req.model, "model")
        return arch_from_record(rec, res, "model", qk_norm), rec
    return None, None


# --------------------------------------------------------------------------- request

class TensorSpec(CalcRequest):
    name: str = Field("tensor", max_length=200, description="Label shown in the outputs.")
    shape: list[PosInt] = Field(min_length=1, max_length=8, description="Dimensions; values = product.", examples=[[4096, 12288]])
    count: PosInt = Field(1, description="Identical tensors of this shape (e.g. 3 SwiGLU matrices, 2 buffer slots).")
    format: Format | None = Field(None, description="Storage format of this tensor; defaults to the request's `format`.")


class ComponentFormats(CalcRequest):
    """Per-component overrides of `format` (e.g. routed experts 4-bit, the rest BF16)."""

    attention: Format | None = None
    dense_ffn: Format | None = None
    routed_experts: Format | None = None
    shared_experts: Format | None = None
    router: Format | None = None
    norms: Format | None = None
    embeddings: Format | None = None
    lm_head: Format | None = None


class WeightMemoryRequest(CalcRequest):
    """Exactly one of `model`, `architecture`, `params`, `tensors` describes what is stored."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id in the store (e.g. qwen3-8b).", examples=["qwen3-8b"])
    architecture: ShapeArchitecture | None = Field(None, description="Explicit shapes instead of a model id.")
    params: PosFloatSweep | None = Field(None, description="Explicit parameter count (e.g. 235e9 for a '235B' label). Sweepable.", examples=[235e9])
    tensors: list[TensorSpec] | None = Field(None, min_length=1, max_length=200, description="Explicit tensors (one group), repeated `copies` times.")
    copies: PosInt = Field(1, description="Repeat the `tensors` group this many times (e.g. layers).")
    format: Format = Field("bf16", description="Storage format: bf16|fp16|fp32|fp8|int8|mxfp8|q8_0|int4|fp4|int4_g128|q4_0|mxfp4|nvfp4 or {bits_per_value, group_size, scale_bytes_per_group}.")
    component_formats: ComponentFormats | None = Field(None, description="Per-component format overrides (model/architecture only).")
    compare_formats: list[Format] = Field(default_factory=list, max_length=20, description="Further formats to report side by side (all components in that format).")
    include_embeddings: bool = Field(True, description="Count the input embedding and LM head.")
    include_norms: bool = Field(True, description="Count RMSNorm weight vectors.")
    qk_norm: bool | None = Field(None, description="Override: the model has per-head Q/K norms (Qwen3). Default: the record's flag, else false.")
    devices: PosIntSweep = Field(1, description="Devices sharing one replica (tensor/expert parallel degree). Sweepable.", examples=[8])
    expert_parallel: bool = Field(False, description="Place whole experts on devices (ceil(experts/devices) each) instead of slicing every expert.")
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id whose memory_bytes is the per-device capacity.", examples=["h100-sxm"])
    memory_per_device_bytes: PosFloatSweep | None = Field(None, description="Per-device memory in bytes (80 GB = 80e9), instead of `hardware`. Sweepable.")

    @model_validator(mode="after")
    def _one_source(self):
        given = [k for k in ("model", "architecture", "params", "tensors") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of model, architecture, params, tensors")
        if self.hardware and self.memory_per_device_bytes is not None:
            raise ValueError("give hardware or memory_per_device_bytes, not both")
        return self


def device_memory(req, lookup: Lookup, res: Result, loc: str = "hardware"):
    """Per-device memory bytes from `hardware` (cited) or an explicit field, else None."""
    if getattr(req, "hardware", None):
        rec = fetch(lookup, "hardware", req.hardware, loc)
        mem = fact_value(rec, "memory_bytes", loc=loc)
        res.cite(fact_source(rec, "memory_bytes"))
        return float(mem), rec
    return None, None


# --------------------------------------------------------------------------- compute

def _fmt_for(req: WeightMemoryRequest, comp: str) -> Format:
    cf = req.component_formats
    f = getattr(cf, comp) if cf else None
    return f if f is not None else req.format


def compute(req: WeightMemoryRequest, lookup: Lookup) -> Result:
    res = Result(inputs=req.model_dump(mode="json", exclude_none=True), outputs={})
    mem_hw, _ = device_memory(req, lookup, res)
    x = broadcast({"devices": req.devices, "params": req.params if req.params is not None else 1.0,
                   "memory_per_device_bytes": req.memory_per_device_bytes if req.memory_per_device_bytes is not None else 1.0})
    devices = x["devices"]
    mem = None
    if mem_hw is not None:
        mem = np.asarray(mem_hw) + 0.0 * devices
    elif req.memory_per_device_bytes is not None:
        mem = x["memory_per_device_bytes"] + 0.0 * devices
    o: dict = {}
    fmt_main = req.format
    res.assume(f"Storage format {format_label(fmt_main)}: {num(bits_per_param(fmt_main))} bits per parameter on average"
               + (f" ({FORMAT_NOTES[fmt_main]})." if isinstance(fmt_main, str) and fmt_main in FORMAT_NOTES else "."))

    arch, rec = (None, None)
    if req.model or req.architecture:
        arch, rec = resolve_arch(req, lookup, res, req.qk_norm)

    if req.tensors is not None:
        rows, group_params, group_bytes = [], 0.0, 0.0
        for t in req.tensors:
            values = float(math.prod(t.shape))
            f = t.format if t.format is not None else req.format
            each = float(format_bytes(values, f))
            rows.append({"name": t.name, "shape": t.shape, "count": t.count, "format": format_label(f),
                         "params_each": values, "bytes_each": each, "params": values * t.count, "bytes": each * t.count})
            group_params += values * t.count
            group_bytes += each * t.count
        t0 = req.tensors[0]
        res.step(f"tensor '{t0.name}'", "values = ∏ shape; bytes = values × bits/8 (+ group scales)",
                 f"{' × '.join(map(str, t0.shape))} = {num(rows[0]['params_each'])} values → {fmt_bytes(rows[0]['bytes_each'])}",
                 rows[0]["bytes_each"], "B")
        res.step("one group", "Σ count × bytes_each", " + ".join(f"{r['count']} × {num(r['bytes_each'])}" for r in rows[:8])
                 + (" + …" if len(rows) > 8 else ""), group_bytes, "B")
        params_total = group_params * req.copies
        bytes_total = group_bytes * req.copies
        if req.copies > 1:
            res.step("all copies", "total = copies × group", f"{req.copies} × {fmt_bytes(group_bytes)}", bytes_total, "B")
        o.update(tensors=rows, group_params=group_params, group_bytes=group_bytes, copies=req.copies)
        sharded, replicated, routed = bytes_total, 0.0, 0.0
        params_arr = np.asarray(params_total)
        bytes_arr = np.asarray(bytes_total)
        res.assume("Tensors are split evenly across the devices (no replicated part).")
    elif arch is None:
        if req.params is not None:
            params_arr = x["params"]
            res.step("parameters", "N (explicit)", num(first(params_arr)), params_arr, "params")
        else:
            params_arr = np.asarray(float(fact_value(rec, "params_total", loc="model")))
            res.cite(fact_source(rec, "params_total"))
            res.assume(f"{rec.get('id')} has attention '{rec.get('attention')}', whose projections this calculator does not "
                       "itemise; its stored total parameter count is used instead.")
            res.step("parameters", "N = params_total (store)", num(first(params_arr)), params_arr, "params")
        bytes_arr = format_bytes(params_arr, fmt_main)
        res.step("weight bytes", "W = N × bits/8 (+ group scales)",
                 f"{num(first(params_arr))} × {num(bits_per_param(fmt_main))} / 8", bytes_arr, "B")
        sharded, replicated, routed = bytes_arr, 0.0, 0.0
        res.assume("An explicit parameter count has no per-component split: it is divided evenly across the devices.")
    else:
        led = ledger(arch)
        comp = dict(led["components"])
        if not req.include_embeddings:
            comp["embeddings"] = comp["lm_head"] = 0
        if not req.include_norms:
            comp["norms"] = 0
        comp_bytes = {k: float(format_bytes(v, _fmt_for(req, k))) for k, v in comp.items()}
        params_total = float(sum(comp.values()))
        bytes_total = float(sum(comp_bytes.values()))
        pl = led["per_layer"]
        a = arch
        if a.attention == "mla":
            res.step("attention params / layer (MLA)",
                     "q (LoRA) + kv_a d×(r_kv+d_rope) + kv_b r_kv×H×(d_nope+d_v) + o H×d_v×d",
                     f"q_lora {a.q_lora}, r_kv {a.kv_lora}, H {a.heads}, d {a.d}", pl["attention"], "params")
        else:
            res.step("attention params / layer", "Q d×H·h + K,V 2×d×KV·h + O H·h×d",
                     f"{a.d}×{a.heads}×{a.head_dim} + 2×{a.d}×{a.kv_heads}×{a.head_dim} + {a.heads}×{a.head_dim}×{a.d}",
                     pl["attention"], "params")
        if a.ffn and a.dense_ffn_layers:
            res.step("dense FFN params / layer", f"{a.ffn_matrices} × d × f", f"{a.ffn_matrices} × {a.d} × {a.ffn}", pl["dense_ffn"], "params")
        if a.experts:
            res.step("experts per MoE layer", "(E + shared) × 3 × d × f_e + router d × E",
                     f"({a.experts} + {a.shared}) × {a.ffn_matrices} × {a.d} × {a.expert_ffn} + {a.d} × {a.experts}",
                     exact((a.experts + a.shared) * pl["expert"] + a.d * a.experts), "params")
        if comp["embeddings"]:
            res.step("embeddings + head", "V × d × (1 if tied else 2)", f"{a.vocab} × {a.d} × {1 if a.tied else 2}",
                     comp["embeddings"] + comp["lm_head"], "params")
        res.step("total parameters", "Σ components", " + ".join(num(v) for v in comp.values() if v), params_total, "params")
        res.step("weight bytes", "Σ component params × bits/8", " + ".join(num(v) for v in comp_bytes.values() if v),
                 bytes_total, "B")
        core_params = led["core_matrix"]
        core_bytes = sum(float(format_bytes(led["active_matrix"]["attention"] if k == "attention" else comp[k], _fmt_for(req, k)))
                         for k in ("attention", "dense_ffn", "routed_experts", "shared_experts", "router"))
        o.update(
            breakdown={k: {"params": comp[k], "bytes": comp_bytes[k], "format": format_label(_fmt_for(req, k))} for k in COMPONENTS},
            core_matrix_params=core_params, core_matrix_bytes=core_bytes,
            params_active=led["active_total"],
            per_layer={"attention_params": pl["attention"], "dense_ffn_params": pl["dense_ffn"],
                       "expert_params": pl["expert"], "norm_params": pl["norms"],
                       "forward_flops_per_token": 2 * (led["active_matrix_total"] / a.layers)},
        )
        if req.component_formats:
            over = {k: format_label(getattr(req.component_formats, k)) for k in COMPONENTS
                    if getattr(req.component_formats, k) is not None}
            res.assume("Component formats: " + ", ".join(f"{k} {v}" for k, v in over.items())
                       + f"; everything else {format_label(fmt_main)}.")
        res.assume("Bias vectors, rotary tables and quantisation metadata beyond the chosen format are not counted.",
                   "Embeddings and LM head are split across devices by vocabulary; norms and the router are replicated.")
        if a.experts:
            res.assume("MoE layers hold every routed expert; `params_active` counts the experts_per_token routed experts, "
                       "shared experts, attention, norms, embeddings and head used by one token.")
        routed = comp_bytes["routed_experts"]
        replicated = comp_bytes["norms"] + comp_bytes["router"]
        sharded = bytes_total - replicated - routed
        params_arr = np.asarray(params_total)
        bytes_arr = np.asarray(bytes_total)

    # per-device share
    if arch is not None and req.expert_parallel and arch.experts:
        routed_share = routed * np.ceil(arch.experts / devices) / arch.experts
        res.assume("Expert parallel: whole experts are placed on devices, ceil(experts / devices) per device.")
    else:
        routed_share = routed / devices
    per_device = sharded / devices + replicated + routed_share
    res.step("per device", "W_dev = sharded / n + replicated", f"{fmt_bytes(first(sharded + routed))} / {int(first(devices))}"
             + (f" + {fmt_bytes(replicated)}" if replicated else ""), per_device, "B")

    o.update(params_total=out(params_arr), bytes_total=out(bytes_arr),
             bits_per_param=out(bytes_arr * 8.0 / np.maximum(params_arr, 1e-300)),
             devices=out(devices), per_device_bytes=out(per_device))
    if mem is not None:
        remaining = mem - per_device
        fits = remaining >= 0
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.where(mem > replicated, np.ceil((sharded + routed) / np.where(mem > replicated, mem - replicated, 1.0)), np.inf)
        res.step("remaining per device", "M − W_dev", f"{fmt_bytes(first(mem))} − {fmt_bytes(first(per_device))}", remaining, "B")
        o.update(memory_per_device_bytes=out(mem), remaining_per_device_bytes=out(remaining),
                 fits=out(fits) if np.ndim(fits) else bool(fits), min_devices=out(need))
        res.assume("Fit counts weights only: KV cache, activations, workspace and allocator reserve need their own room.")

    if req.compare_formats:
        rows = []
        for f in req.compare_formats:
            if arch is not None:
                comp_all = o["breakdown"]
                pt = sum(v["params"] for v in comp_all.values())
                b = np.asarray(float(format_bytes(pt, f)))
            else:
                b = format_bytes(params_arr, f)
            rows.append({"format": format_label(f), "bits_per_param": bits_per_param(f), "bytes_total": out(b),
                         "per_device_bytes": out(b / devices)})
        o["by_format"] = rows
        res.step(f"in {rows[0]['format']}", "W = N × bits/8", f"{num(first(params_arr))} × {num(rows[0]['bits_per_param'])} / 8",
                 np.asarray(rows[0]["bytes_total"]), "B")
    res.outputs = o
    return res


CALCULATORS = [
    Calculator(
        name="weight-memory",
        family="weight_memory",
        title="Weight memory and fit",
        summary="Parameters and bytes of a model from its shapes (GQA/MLA attention, SwiGLU FFN, MoE experts, "
                "embeddings) or from a parameter count or tensor list, per storage format, and the share per device.",
        description="Counts every matrix per layer (Q, K, V, O or the MLA low-rank projections; gate/up/down; routed "
                    "and shared experts; router), the embedding and LM head (once when tied) and RMSNorm vectors, "
                    "then stores each component in its format (group scales included: q4_0, mxfp4, nvfp4, "
                    "int4_g128 or a custom {bits, group, scale bytes}). Per device: sharded parts / devices + "
                    "replicated norms and router; with expert_parallel, whole experts per device. Weights only.",
        request_model=WeightMemoryRequest,
        compute=compute,
        example={"model": "qwen3-235b-a22b", "format": "bf16", "component_formats": {"routed_experts": "mxfp4"},
                 "devices": 8, "memory_per_device_bytes": 80e9, "compare_formats": ["fp8", "int4"]},
        cases=("model-resource-accounting", "model-parallelism", "weight-handoff", "model-operator-examples"),
        sweepable=("devices", "params", "memory_per_device_bytes"),
        chart=Chart(x="devices", y=("per_device_bytes",), x_label="devices", y_label="bytes per device"),
        extra_examples=({"params": [7e9, 70e9, 235e9], "format": "bf16", "compare_formats": ["int8", "int4"]},
                        {"tensors": [{"name": "gate_proj", "shape": [12288, 4096]}], "devices": [4, 8]}),
    ),
]


Architecture = ShapeArchitecture  # the name other modules import
