"""Request sub-models several calculators share: a model described by hand instead of by id.

`PricePerMtok` is the one shape of a per-million-token price (routing-cost, prefix-cache). `Architecture` (layer groups of cached streams, the KV form of DESIGN's `kv-cache` contract) is read by kv-cache,
kv-eviction and prefix-cache; `ShapeArchitecture` (transformer shapes by name, as in the store's model records)
by weight-memory, roofline and training-compute, which turn it into an `Arch` with `arch_from_request` or take
whichever of `model`, `model_config` or `architecture` a request gives with `resolve_arch`.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from calculators.domain.architecture import Arch, arch_from_record, model_record
from calculators.domain.formats import FormatField
from calculators.framework import CalcInputError, CalcRequest, Lookup, NonNegFloat, Result

# --------------------------------------------------------------------------- prices

class PricePerMtok(CalcRequest):
    """Prices per million tokens, in any one currency (USD, or the book's cost units), as a provider bills them."""

    input: NonNegFloat = Field(description="Price of one million uncached input tokens.", examples=[2])
    cache_read: NonNegFloat | None = Field(None, description="Price of one million prefix tokens read from the cache "
                                           "on a hit. Omitted: same as `input` (no cache discount).", examples=[0.2])
    cache_write: NonNegFloat | None = Field(None, description="Price of one million tokens written to the cache "
                                            "(the prefix a miss stores). Omitted: same as `input`.", examples=[2.5])
    output: NonNegFloat | None = Field(None, description="Price of one million billed output tokens (thinking included); "
                                       "needed where outputs are billed (routing-cost).", examples=[8])


# --------------------------------------------------------------------------- layer groups (KV form)

Count = Annotated[int, Field(ge=0, le=10**6)]
Dim = Annotated[int, Field(ge=1, le=10**9)]
Heads = Annotated[int, Field(ge=1, le=10**6)]


class Stream(CalcRequest):
    """One cached stream of a layer: `dim` values per retained entry."""

    name: str | None = Field(None, max_length=100, description="Label (kv, latent, window, compressed, indexer).")
    dim: Dim = Field(description="Values stored per retained entry (GQA: 2·kv_heads·head_dim; MLA: kv_lora_rank + rope_dim).",
                     examples=[2048])
    window: Annotated[int, Field(ge=1, le=10**15)] | None = Field(
        None, description="Sliding window: keep at most this many entries (null = full history).", examples=[None])
    ratio: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="One entry per `ratio` tokens (compressed history).")


class LayerGroup(CalcRequest):
    """`count` identical layers."""

    name: str | None = Field(None, max_length=100, description="Label of the group.")
    count: Count = Field(description="Number of layers in the group.", examples=[36])
    streams: Annotated[list[Stream], Field(max_length=16)] = Field(default_factory=list, description="Cached streams per layer.")
    state_elements: Annotated[int, Field(ge=0, le=10**12)] = Field(
        0, description="Recurrent state values per layer, independent of tokens (KDA/SSM).", examples=[0])
    kv_heads: Heads | None = Field(None, description="KV heads the streams split into under tensor parallelism "
                                   "(null: the streams are a shared latent, replicated on every rank).", examples=[8])
    state_heads: Heads | None = Field(None, description="Heads the recurrent state splits into under tensor parallelism "
                                      "(null: replicated).")
    state_format: FormatField | None = Field(None, description="Format of this group's state (default: the request's `state_format`).")


class Architecture(CalcRequest):
    layer_groups: Annotated[list[LayerGroup], Field(min_length=1, max_length=64)] = Field(
        description="Layer groups in streams form.",
        examples=[[{"count": 36, "streams": [{"dim": 2048, "window": None, "ratio": 1}], "kv_heads": 8}]])


# --------------------------------------------------------------------------- transformer shapes

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


def resolve_arch(req, lookup: Lookup, res: Result, qk_norm: bool | None = None) -> tuple[Arch | None, dict | None]:
    """The Arch of a request's `model` id or `architecture`; (None, record) when only labels are known."""
    if getattr(req, "architecture", None) is not None:
        return arch_from_request(req.architecture), None
    rec = model_record(req, lookup, res, required=False)
    if rec is not None:
        return arch_from_record(rec, res, "model" if getattr(req, "model", None) else "model_config", qk_norm), rec
    return None, None
