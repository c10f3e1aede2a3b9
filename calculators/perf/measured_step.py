"""A measured estimate of one decode or prefill step: the per-layer kernels of one tensor-parallel rank, each
looked up in measured tables (`calculators.perf.measured`), summed the way the step runs them one after another.

Per layer, on one rank of `tp`: QKV projection GEMM (m = tokens in the step, n = (heads/tp + 2·⌈kv_heads/tp⌉)·
head_dim, k = hidden), attention (decode: the generation table at batch × (context + 1) keys; prefill: the context
table at batch × prompt tokens), output projection (n = hidden, k = heads/tp · head_dim), then either the dense
SwiGLU FFN (gate+up fused: n = 2·ffn/tp, k = hidden; down: n = hidden, k = ffn/tp) or, on MoE layers, the router
GEMM, the fused MoE kernel and any shared-expert GEMMs; with tp > 1 two all-reduces of tokens × hidden values
(BF16). Times the layers, plus the LM head GEMM (n = vocab/tp) for every position that needs logits.

Not modelled: norms, rotary embedding, activation and residual kernels, sampling, the embedding all-reduce and
the logits gather, kernel launch gaps and CPU scheduling, overlap between kernels; MLA and hybrid/linear
attention (an MLA attention block is its peak-rate bound divided by this step's measured GEMM efficiency, flagged
extrapolated; hybrid/linear attention has no `Arch` and is refused); sliding windows (every layer attends to the
whole context); expert parallelism (experts are split by TP).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calculators.domain import Arch, ledger
from calculators.framework import CalcInputError
from calculators.perf.measured import (
    allreduce_kernel,
    attention_kernel,
    context_attention_bound_s,
    gemm_kernel,
    generation_attention_bound_s,
    moe_kernel,
    moe_bound_s,
    flags_of,
    gemm_bound_s,
)
from calculators.perf.measured_tables import (
    HOLE,
    OUTSIDE,
    MeasuredSystem,
    dtype_bytes,
    table_dtype,
)

NOT_MODELLED = (
    "norms, rotary embedding, activation, residual and sampling kernels",
    "the embedding all-reduce and the logits gather under TP",
    "launch gaps, CPU scheduling and any overlap between kernels (ops are summed back to back)",
    "MLA attention (its bound ÷ the step's measured GEMM efficiency, flagged extrapolated) and hybrid/linear attention",
    "sliding windows (every layer attends to the whole context)",
    "expert parallelism (MoE experts are split by TP, EP = 1)",
)


@dataclass
class StepEstimate:
    """A measured step estimate; arrays have the broadcast shape of batch × context × tp."""

    phase: str
    total_s: np.ndarray
    parts_s: dict[str, np.ndarray]          # per op, summed over layers (seconds)
    flags: dict[str, np.ndarray]            # per op: measured / interpolated / extrapolated (worst over its lookups)
    bound_s: np.ndarray                     # Σ per-op peak-rate bounds (communication not included)
    parts_bound_s: dict[str, np.ndarray]
    extrapolated_fraction: np.ndarray       # share of this step's op lookups that were extrapolated
    framework: str
    version: str
    tables: dict[str, str] = field(default_factory=dict)   # table -> "framework version"
    not_modelled: tuple[str, ...] = NOT_MODELLED

    @property
    def ratio_to_bound(self) -> np.ndarray:
        """Measured estimate (without communication) ÷ the sum of per-op peak-rate bounds."""
        comm = self.parts_s.get("allreduce", 0.0)
        return (self.total_s - comm) / self.bound_s


class _Acc:
    """Collects ops: time × count, bound × count and the worst status per op."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.parts: dict[str, np.ndarray] = {}
        self.bounds: dict[str, np.ndarray] = {}
        self.status: dict[str, np.ndarray] = {}
        self.lookups = np.zeros(shape)
        self.extrapolated = np.zeros(shape)

    def add(self, name: str, lat: np.ndarray, status: np.ndarray, bound: np.ndarray, count: Any,
            active: np.ndarray | bool = True) -> None:
        lat, status, bound, count, active = np.broadcast_arrays(lat, status, bound, np.asarray(count, dtype=float),
                                                                np.asarray(active, dtype=bool))
        t = np.where(active, lat * count, 0.0)
        b = np.where(active, bound * count, 0.0)
        self.parts[name] = self.parts.get(name, 0.0) + np.broadcast_to(t, self.shape)
        self.bounds[name] = self.bounds.get(name, 0.0) + np.broadcast_to(b, self.shape)
        st = np.where(active, status, -1)
        self.status[name] = np.maximum(self.status.get(name, np.full(self.shape, -1)), np.broadcast_to(st, self.shape))
        on = np.broadcast_to(active & (count > 0), self.shape)
        self.lookups += on
        self.extrapolated += on & np.broadcast_to(status >= OUTSIDE, self.shape)


def _rank_heads(arch: Arch, tp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if np.any(arch.heads % tp):
        raise CalcInputError("tp", f"{arch.heads} attention heads do not split evenly over tp = {tp.ravel().tolist()}")
    return arch.heads / tp, np.ceil(arch.kv_heads / tp)


def _step(arch: Arch, system: MeasuredSystem, phase: str, batch: Any, new_tokens: Any, context_tokens: Any,
          tp: Any, weight_dtype: str, kv_dtype: str) -> StepEstimate:
    if arch.attention not in ("mha", "gqa", "mqa", "mla"):
        raise CalcInputError("model", f"{arch.name}: attention {arch.attention!r} has no measured kernels here")
    b, p, c, t = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in (batch, new_tokens, context_tokens, tp)])
    shape = b.shape
    if np.any(b < 1) or np.any(p < 1) or np.any(c < 0) or np.any(t < 1):
        raise CalcInputError("batch", "batch, tokens and tp must be ≥ 1 and context_tokens ≥ 0")
    wdt = table_dtype(weight_dtype)
    rates = system.rates
    acc = _Acc(shape)
    L = arch.layers
    tokens = b * p
    d, hd = float(arch.d), float(arch.head_dim)
    h_r, kv_r = _rank_heads(arch, t)

    def gemm(name: str, m, n, k, count, dtype: str = wdt) -> None:
        lat, st = gemm_kernel(system, m, n, k, dtype)
        acc.add(name, lat, st, gemm_bound_s(m, n, k, table_dtype(dtype), rates), count)

    mla = arch.attention == "mla"
    if not mla:
        gemm("qkv_proj", tokens, (h_r + 2.0 * kv_r) * hd, d, L)
        if phase == "decode":
            s = c + p
            lat, st = attention_kernel(system, "generation_attention_perf", b, s, h_r, kv_r, arch.head_dim, kv_dtype, 0)
            bound = generation_attention_bound_s(b, s, h_r, kv_r, hd, dtype_bytes(table_dtype(kv_dtype)), rates)
        else:
            lat, st = attention_kernel(system, "context_attention_perf", b, p, h_r, kv_r, arch.head_dim, kv_dtype, 0)
            bound = context_attention_bound_s(b, p, h_r, kv_r, hd, rates)
            # a cached prefix is not in the table: scale by causal (query, key) pairs, flagged extrapolated
            pairs = (p * c + p * (p + 1.0) / 2.0) / (p * (p + 1.0) / 2.0)
            lat, bound = lat * pairs, bound * pairs
            st = np.where(c > 0, np.maximum(st, HOLE), st)
        acc.add("attention", lat, st, bound, L)
        gemm("o_proj", tokens, d, h_r * hd, L)
    dense_layers, moe_layers = arch.dense_ffn_layers, arch.moe_layers
    if dense_layers and arch.ffn:
        gemm("ffn_gate_up", tokens, 2.0 * arch.ffn / t, d, dense_layers)
        gemm("ffn_down", tokens, d, arch.ffn / t, dense_layers)
    if moe_layers:
        gemm("router", tokens, float(arch.experts), d, moe_layers, "bfloat16")
        lat, st = moe_kernel(system, tokens, d, arch.expert_ffn, arch.top_k, arch.experts, t, 1.0, weight_dtype, "balanced")
        acc.add("moe", lat, st, moe_bound_s(tokens, d, arch.expert_ffn, arch.top_k, arch.experts, t, 1.0, wdt, rates),
                moe_layers)
        if arch.shared:
            gemm("shared_experts", tokens, 2.0 * arch.shared * arch.expert_ffn / t, d, moe_layers)
            gemm("shared_experts", tokens, d, arch.shared * arch.expert_ffn / t, moe_layers)
    multi = t > 1
    if np.any(multi):
        lat, st = allreduce_kernel(system, tokens * d, np.maximum(t, 2.0), "bf16")
        acc.add("allreduce", lat, st, np.zeros(shape), 2 * L, multi)
    logits = tokens if phase == "decode" else b
    gemm("lm_head", logits, arch.vocab / t, d, 1)
    if mla:
        _mla_fallback(arch, acc, phase, b, p, c, t, wdt, kv_dtype, rates)
    parts = {k: np.asarray(v, dtype=float) for k, v in acc.parts.items()}
    total = sum(parts.values())
    bounds = {k: np.asarray(v, dtype=float) for k, v in acc.bounds.items() if k != "allreduce"}
    flags = {k: np.where(v < 0, "none", flags_of(np.maximum(v, 0))) for k, v in acc.status.items()}
    gemm_rec = system.tables.get("gemm_perf") or next(iter(system.tables.values()))
    return StepEstimate(phase, np.asarray(total, dtype=float), parts, flags, np.asarray(sum(bounds.values()), dtype=float),
                        bounds, acc.extrapolated / np.maximum(acc.lookups, 1), str(gemm_rec.get("framework")),
                        str(gemm_rec.get("version")), system.provenance)


def _mla_fallback(arch: Arch, acc: _Acc, phase: str, b, p, c, t, wdt: str, kv_dtype: str, rates) -> None:
    """MLA attention block: its peak-rate bound divided by the measured efficiency of this step's GEMMs."""
    gemm_names = [k for k in acc.parts if k not in ("attention", "moe", "allreduce")]
    measured = sum(acc.parts[k] for k in gemm_names)
    bound = sum(acc.bounds[k] for k in gemm_names)
    with np.errstate(invalid="ignore", divide="ignore"):
        eff = np.where(measured > 0, bound / measured, 1.0)
    tokens = b * p
    attn_params = ledger(arch)["per_layer"]["attention"] / t
    pairs = p * c + p * (p + 1.0) / 2.0
    flops = 2.0 * tokens * attn_params + 2.0 * b * pairs * arch.heads / t * (arch.qk_dim + arch.vo_dim)
    byts = attn_params * dtype_bytes(wdt) + b * (c + p) * arch.kv_values_per_token() * dtype_bytes(table_dtype(kv_dtype))
    one = np.maximum(flops / rates.peak(wdt), byts / rates.memory_bandwidth_bytes_per_s)
    acc.add("mla_attention_fallback", one / eff, np.full(acc.shape, HOLE), one, arch.layers)


def decode_step(arch: Arch, system: MeasuredSystem, batch: Any = 1, context_tokens: Any = 0, tp: Any = 1,
                weight_dtype: str = "bf16", kv_dtype: str = "bf16") -> StepEstimate:
    """Measured estimate of one decode step: `batch` sequences each add one token after `context_tokens` cached
    ones, on one of `tp` tensor-parallel ranks (batch, context_tokens and tp broadcast as arrays)."""
    return _step(arch, system, "decode", batch, 1, context_tokens, tp, weight_dtype, kv_dtype)


def prefill_step(arch: Arch, system: MeasuredSystem, batch: Any = 1, tokens: Any = 1024, tp: Any = 1,
                 weight_dtype: str = "bf16", kv_dtype: str = "bf16", context_tokens: Any = 0) -> StepEstimate:
    """Measured estimate of one prefill step: `batch` prompts of `tokens` tokens each (after `context_tokens`
    cached ones, scaled by causal pairs and flagged extrapolated); logits for the last position only."""
    return _step(arch, system, "prefill", batch, tokens, context_tokens, tp, weight_dtype, kv_dtype)
