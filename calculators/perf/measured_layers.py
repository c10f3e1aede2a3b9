"""Measured kernels of the architecture-specific layers of a step: MLA and DeepSeek sparse attention (DSA), the
linear-attention state updates (Gated DeltaNet, KDA) and the MoE all-to-all, for one serving framework.

The tables (NVIDIA AIConfigurator's, Apache-2.0) are read through the one interpolation of
`calculators.perf.measured_tables` (`index_table`, `estimate`: log-multilinear inside the measured grid, the
peak-rate bound's ratio outside it). What each table measures, and how it maps onto the step model's operations:

- `generation_mla` / `context_mla` (SGLang, TensorRT-LLM): the MLA core alone, decode in the latent space over
  `isl + step` cached tokens, prefill over `isl` new ones, keyed by heads per rank and KV dtype: the step's
  `mla_attention` op directly.
- `mla_generation_module` / `mla_context_module` (vLLM: the only MLA rows it has) and `dsa_*_module` (all three): the
  whole attention block of DeepSeek-V3 (resp. DeepSeek-V3.2 / GLM-5, by the `architecture` column) — its
  projection GEMMs, at decode the absorbed up-projections as two batched matmuls (`mla_bmm`), the core, and for DSA
  the indexer. The step model counts the projections in its own GEMM op (`attn_proj`), so the core here is the
  module minus that block's projections, each looked up in the GEMM table (the BMMs in `mla_bmm`) at the module's
  geometry (`MLA_MODULE_GEOMETRY`, `DSA_GEOMETRY`). For DSA the remainder is shared between the sparse core and the
  indexer in proportion to their peak-rate bounds.
- `gdn` / `kda`: one layer's state kernels, a short causal convolution plus the chunked (prefill) or recurrent
  (decode) delta rule, keyed by heads per rank: their sum.
- `moe_a2a` (vLLM, TensorRT-LLM: DeepEP over 8 GPUs, `latency` in µs) and `wideep_deepep_ll` / `wideep_deepep_normal`
  (SGLang: DeepEP low-latency for decode, normal for prefill): one dispatch and one combine per MoE layer at the
  tokens of one rank.

A shape a table does not cover is moved from the nearest measured one by the bound ratio and flagged extrapolated;
a table that is absent, or a dtype it never measured, raises `CalcInputError`, which the step evaluator turns into a
fallback it reports. Latencies are seconds per call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from calculators.domain import LINEAR, MLA
from calculators.framework import CalcInputError
from calculators.perf.measured import gemm_kernel
from calculators.perf.measured_tables import (
    HOLE, MEASURED, Grid, MeasuredSystem, Rates, estimate, index_table, table_dtype,
)
from calculators.perf.step_terms import causal_pairs

__all__ = ["DSA_GEOMETRY", "LayerKernels", "MLA_MODULE_GEOMETRY", "MlaGeometry", "alltoall_kernel", "linear_state_kernel",
           "mla_core_kernel"]


@dataclass(frozen=True)
class MlaGeometry:
    """An MLA attention block: hidden size, LoRA ranks, per-head widths, and the DSA indexer (0: none)."""

    d: int
    q_lora: int
    kv_lora: int
    nope: int
    rope: int
    v: int
    index_heads: int = 0
    index_dim: int = 0


#: the blocks the module tables were measured on (their `model` / `architecture` columns), as the models' published
#: config.json give them
MLA_MODULE_GEOMETRY = MlaGeometry(7168, 1536, 512, 128, 64, 128)          # deepseek-ai/DeepSeek-V3
DSA_GEOMETRY = {"DeepseekV32ForCausalLM": MlaGeometry(7168, 1536, 512, 128, 64, 128, 64, 128),   # DeepSeek-V3.2
                "GlmMoeDsaForCausalLM": MlaGeometry(6144, 2048, 512, 192, 64, 256, 32, 128)}    # zai-org/GLM-5
#: the absorbed-MLA batched matmuls of `mla_bmm` were measured at 128-wide heads and a 512-wide latent
BMM_HEAD, BMM_LATENT = 128, 512

CORE_CATS, CORE_GEN_AXES, CORE_CTX_AXES = ("kv_cache_dtype",), ("batch_size", "seq_len", "num_heads"), ("batch_size", "isl", "num_heads")
MODULE_CATS, DSA_CATS = ("kv_cache_dtype", "gemm_type"), ("architecture", "kv_cache_dtype", "gemm_type")
BMM_CATS, BMM_AXES = ("op_name", "bmm_dtype"), ("num_tokens", "num_heads")
LIN_CATS = ("phase", "part", "num_v_heads", "num_k_heads", "d_model", "head_k_dim", "head_v_dim")
A2A_CATS = ("comm_backend", "phase", "comm_dtype", "hidden_size", "topk", "num_experts")
DEEPEP_CATS = ("hidden_size", "num_topk", "num_experts")
#: GPUs of one DeepEP all-to-all in the tables (one 8-GPU node)
A2A_GPUS = 8
_SEQ = {"seq_len": lambda c: np.asarray(c["isl"]) + np.asarray(c["step"])}
#: the convolution kernels of a linear-attention layer (the rest update the state)
_PART = {"part": lambda c: np.where(np.char.find(np.asarray(c["kernel_source"]).astype(str), "conv1d") >= 0, "conv", "state")}


def _kv(dtype: str) -> str:
    return "fp8" if table_dtype(dtype) == "fp8" else "bfloat16"


def _gemm_type(dtype: str) -> str:
    return "fp8_block" if table_dtype(dtype) in ("fp8", "fp8_block") else "bfloat16"


def _arr(*xs):
    return np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in xs])


# --------------------------------------------------------------------------- bounds (for the ratios outside a grid)

def mla_core_bound_s(b, s, h, g: MlaGeometry, kv_bytes: float, rates: Rates, decode: bool) -> np.ndarray:
    """Peak-rate bound of one MLA core call: decode in the latent space over s keys, prefill causal over s tokens."""
    b, s, h = _arr(b, s, h)
    if decode:
        flops = 2.0 * b * h * s * (2 * g.kv_lora + g.rope)
        byts = b * s * (g.kv_lora + g.rope) * kv_bytes
    else:
        flops = 2.0 * b * s * (s + 1) / 2 * h * (g.nope + g.rope + g.v)
        byts = b * s * h * (2 * (g.nope + g.rope) + 2 * g.v) * 2.0
    return np.maximum(flops / rates.peak("bfloat16"), byts / rates.memory_bandwidth_bytes_per_s)


def _bmm_bound_s(m, h, rates: Rates) -> np.ndarray:
    m, h = _arr(m, h)
    flops = 2.0 * m * h * BMM_HEAD * BMM_LATENT
    byts = h * BMM_HEAD * BMM_LATENT * 2.0 + m * h * (BMM_HEAD + BMM_LATENT) * 2.0
    return np.maximum(flops / rates.peak("bfloat16"), byts / rates.memory_bandwidth_bytes_per_s)


def _linear_bound_s(b, s, hv, dk, dv, rates: Rates) -> np.ndarray:
    b, s = _arr(b, s)
    flops = 6.0 * b * s * hv * dk * dv
    byts = 2.0 * b * hv * dk * dv * 4.0 + b * s * hv * (2 * dk + dv) * 4.0
    return np.maximum(flops / rates.peak("bfloat16"), byts / rates.memory_bandwidth_bytes_per_s)


# --------------------------------------------------------------------------- MLA

def _grid(grids: dict[tuple, Grid], want: tuple, what: str, loc: str, fallback: dict[int, Any] | None = None) -> Grid:
    """The grid of category `want`; positions in `fallback` may take another value (first listed wins)."""
    if want in grids:
        return grids[want]
    for pos, alt in (fallback or {}).items():
        for c in grids:
            if all(c[i] == v for i, v in enumerate(want) if i != pos) and (alt is None or c[pos] == alt):
                return grids[c]
    raise CalcInputError(loc, f"no measured {what} for {', '.join(map(str, want))}")


def mla_core_kernel(system: MeasuredSystem, decode: bool, b, s, heads, kv_dtype: str, g: MlaGeometry):
    """Seconds of one MLA core call (`generation_mla` at `s` cached keys, `context_mla` over `s` new tokens) and
    status; a core whose latent differs from the tables' (512 + 64) is moved by the bound ratio."""
    table = "generation_mla_perf" if decode else "context_mla_perf"
    grids = index_table(system.table(table), CORE_CATS, CORE_GEN_AXES if decode else CORE_CTX_AXES, _SEQ if decode else None)
    kv = _kv(kv_dtype)
    grid = _grid(grids, (kv,), f"{system.framework} MLA core on {system.name}", "kv_format")
    kvb = 1.0 if kv == "fp8" else 2.0
    ref = MLA_MODULE_GEOMETRY if (g.kv_lora, g.rope) != (MLA_MODULE_GEOMETRY.kv_lora, MLA_MODULE_GEOMETRY.rope) else g
    bound = lambda bb, ss, hh, gg=ref: mla_core_bound_s(bb, ss, hh, gg, kvb, system.rates, decode)
    lat, st = estimate(grid, (b, s, heads), bound)
    if ref is not g:
        lat = lat * mla_core_bound_s(b, s, heads, g, kvb, system.rates, decode) / bound(b, s, heads)
        st = np.maximum(st, HOLE)
    return lat, st


def _bmm_s(system: MeasuredSystem, m, h, g: MlaGeometry):
    """Seconds of the two absorbed up-projections of MLA decode (q by W_UK, the attention output by W_UV) for m tokens
    and h heads, scaled from the table's 128-wide heads to g's."""
    try:
        grids = index_table(system.table("mla_bmm_perf"), BMM_CATS, BMM_AXES)
    except CalcInputError:
        # no BMM rows: each is a GEMM of the same weights and FLOPs (flagged)
        pre, s1 = gemm_kernel(system, m, np.asarray(h) * g.kv_lora, g.nope, "bfloat16")
        post, s2 = gemm_kernel(system, m, np.asarray(h) * g.v, g.kv_lora, "bfloat16")
        return pre + post, np.maximum(np.maximum(s1, s2), HOLE)
    bound = lambda mm, hh: _bmm_bound_s(mm, hh, system.rates)
    total, st = 0.0, np.int8(MEASURED)
    for name, width in (("mla_gen_pre", g.nope), ("mla_gen_post", g.v)):
        grid = _grid(grids, (name, "bfloat16"), f"{system.framework} MLA BMM on {system.name}", "system", {1: None})
        lat, s_ = estimate(grid, (m, h), bound)
        total, st = total + lat * width / BMM_HEAD, np.maximum(st, s_)
    return total, st


def _projections_s(system: MeasuredSystem, g: MlaGeometry, m, h, gemm_type: str, decode: bool):
    """Seconds of an MLA block's projections for m tokens on a rank of h heads: the replicated down-projections
    (queries, latent KV and rope key in one GEMM), the query up-projection, the output projection, the indexer's
    (DSA), and the KV up-projection (prefill) or the two absorbed BMMs (decode)."""
    shapes = [(g.q_lora + g.kv_lora + g.rope, g.d), (np.asarray(h) * (g.nope + g.rope), g.q_lora), (g.d, np.asarray(h) * g.v)]
    if not decode:
        shapes.append((np.asarray(h) * (g.nope + g.v), g.kv_lora))
    if g.index_heads:
        shapes += [(g.index_heads * g.index_dim, g.q_lora), (g.index_dim, g.d), (g.index_heads, g.d)]
    # priced as the step prices its own projection GEMM (FP8 weights: the per-tensor FP8 kernels, which cover the
    # whole shape range; block-scaled where those are missing), so that projections + core give back the module
    spellings = ("fp8", "fp8_block", "bfloat16") if gemm_type == "fp8_block" else ("bfloat16",)
    total, st = 0.0, np.int8(MEASURED)
    for n, k in shapes:
        for i, dt in enumerate(spellings):
            try:
                lat, s_ = gemm_kernel(system, m, n, k, dt)
                break
            except CalcInputError:
                if i == len(spellings) - 1:
                    raise
        total, st = total + lat, np.maximum(st, s_)
    if decode:
        lat, s_ = _bmm_s(system, m, h, g)
        total, st = total + lat, np.maximum(st, s_)
    return total, st


def module_core_kernel(system: MeasuredSystem, table: str, decode: bool, b, s, heads, kv_dtype: str, weight_dtype: str,
                       g: MlaGeometry, architecture: str | None = None):
    """Seconds of an attention block's module table minus its projections (see the module docstring), and status.
    `b` sequences, `s` keys (decode) or new tokens (prefill), `heads` per rank."""
    rec = system.table(table)
    cats = DSA_CATS if architecture else MODULE_CATS
    axes = CORE_GEN_AXES if decode else CORE_CTX_AXES
    grids = index_table(rec, cats, axes, _SEQ if decode else None)
    kv, gt = _kv(kv_dtype), _gemm_type(weight_dtype)
    want = ((architecture,) if architecture else ()) + (kv, gt)
    grid = _grid(grids, want, f"{system.framework} attention module on {system.name}", "kv_format", {len(want) - 1: "bfloat16"})
    gt = next(c for c, gr in grids.items() if gr is grid)[-1]      # the GEMM dtype the module was measured with
    kvb = 1.0 if kv == "fp8" else 2.0
    m = np.asarray(b, dtype=float) * (1.0 if decode else np.asarray(s, dtype=float))
    bound = lambda bb, ss, hh: mla_core_bound_s(bb, ss, hh, g, kvb, system.rates, decode)
    module, st = estimate(grid, (b, s, heads), bound)
    proj, st2 = _projections_s(system, g, m, heads, gt, decode)
    return module - proj, np.maximum(st, st2)


# --------------------------------------------------------------------------- linear attention

def linear_state_kernel(system: MeasuredSystem, table: str, decode: bool, b, s, v_heads: float, d_model: int,
                        dk: int = 128, dv: int = 128):
    """Seconds of one linear-attention layer's state kernels (convolution + delta rule) for `b` sequences of `s`
    new tokens (decode: one each) with `v_heads` value heads on the rank, and status. The measured head count
    nearest `v_heads` (then the model width nearest `d_model`) is used, moved by the bound ratio when it differs."""
    grids = index_table(system.table(table), LIN_CATS, ("batch_size",) if decode else ("batch_size", "seq_len"),
                        _PART)
    phase = "generation" if decode else "context"
    states = [c for c in grids if c[0] == phase and c[1] == "state" and c[5] == dk and c[6] == dv]
    if not states:
        raise CalcInputError("system", f"no measured {system.framework} {phase} {table.removesuffix('_perf')} state kernel "
                             f"of {dk}×{dv} heads on {system.name}")
    pick = min(states, key=lambda c: (abs(np.log(c[2] / v_heads)), abs(np.log(c[4] / d_model)), -c[3]))
    bound = lambda bb, ss=None, hv=pick[2]: _linear_bound_s(bb, 1.0 if ss is None else ss, hv, dk, dv, system.rates)
    q = (b,) if decode else (b, s)
    total, st = 0.0, np.int8(MEASURED)
    for part in ("conv", "state"):
        grid = grids.get((phase, part, *pick[2:]))
        if grid is None:           # a fused decode kernel carries its convolution
            continue
        lat, s_ = estimate(grid, q, bound)
        total, st = total + lat, np.maximum(st, s_)
    if pick[2] != v_heads:
        qq = _arr(*q)
        total = total * _linear_bound_s(qq[0], qq[1] if len(qq) > 1 else 1.0, v_heads, dk, dv, system.rates) / \
            bound(*qq)
        st = np.maximum(st, HOLE)
    return total, st


# --------------------------------------------------------------------------- all-to-all

def _deepep_latency(decode: bool) -> dict[str, Callable]:
    """SGLang's DeepEP tables time a dispatch and a combine per row (µs); one call is their mean, in ms."""
    if decode:
        return {"latency": lambda c: (np.asarray(c["dispatch_avg_t_us"], dtype=float)
                                      + np.asarray(c["combine_avg_t_us"], dtype=float)) / 2e3}
    return {"latency": lambda c: (np.asarray(c["dispatch_transmit_us"], dtype=float) + np.asarray(c["dispatch_notify_us"], dtype=float)
                                  + np.asarray(c["combine_transmit_us"], dtype=float)
                                  + np.asarray(c["combine_notify_us"], dtype=float)) / 2e3}


def alltoall_kernel(system: MeasuredSystem, decode: bool, tokens, hidden: int, topk: int, experts: int, gpus: int):
    """Seconds of one MoE all-to-all call (the mean of a dispatch and a combine) with `tokens` tokens on each of
    `gpus` ranks, and status: DeepEP low-latency mode for decode, normal (high-throughput) mode for prefill. The
    tables measured 8 GPUs; another configuration (hidden size, top-k, experts) or GPU count is moved from the
    nearest measured one by the ratio of the bytes each rank sends, (gpus − 1)/gpus · tokens · top-k · hidden."""
    if system.framework == "sglang":
        rec = system.table("wideep_deepep_ll_perf" if decode else "wideep_deepep_normal_perf")
        grids = index_table(rec, DEEPEP_CATS, ("num_token",), _deepep_latency(decode))
        calls = {k: [g] for k, g in grids.items()}
    else:
        rec = system.table("moe_a2a_perf")
        per_ms = float(rec.get("latency_s_per_unit", 1e-6)) / 1e-3
        grids = index_table(rec, A2A_CATS, ("num_tokens",),
                            {"latency": lambda c, f=per_ms: np.asarray(c["latency"], dtype=float) * f})
        mode = "_ll" if decode else "_ht"
        calls = {}
        for k, g in grids.items():
            if str(k[0]).endswith(mode) and k[2] in ("default", "bfloat16"):
                calls.setdefault(tuple(k[3:]), []).append(g)
        calls = {k: v for k, v in calls.items() if len(v) == 2}        # a dispatch and a combine
    if not calls:
        raise CalcInputError("system", f"no measured {system.framework} all-to-all in {'low-latency' if decode else 'normal'} "
                             f"mode on {system.name}")
    want = np.asarray((hidden, topk, experts), dtype=float)
    near = min(calls, key=lambda k: float(np.sum(np.abs(np.log(np.asarray(k, dtype=float) / want)))))
    bound = lambda t, h=near[0], k=near[1]: np.asarray(t, dtype=float) * k * h * 2.0
    lat, st = 0.0, np.int8(MEASURED)
    for g in calls[near]:
        l_, s_ = estimate(g, (tokens,), bound)
        lat, st = lat + l_ / len(calls[near]), np.maximum(st, s_)
    gpus = np.asarray(gpus, dtype=float)
    scale = (hidden * topk) / (near[0] * near[1]) * ((gpus - 1) / gpus) / ((A2A_GPUS - 1) / A2A_GPUS)
    moved = (scale != 1.0) | (tuple(near) != (hidden, topk, experts))
    return lat * scale, np.where(moved, np.maximum(st, HOLE), st)


# --------------------------------------------------------------------------- one step's lookups

class LayerKernels:
    """The lookups of one step's architecture-specific ops (kinds mla, indexer, linear, alltoall) on one system's
    tables; `bound(op)` is the evaluator's per-op peak-rate bound (DSA shares its module's core between its two ops
    in proportion to it). `tables` collects the tables read."""

    def __init__(self, step, system: MeasuredSystem, bound: Callable[[Any], np.ndarray]):
        self.step, self.system, self.bound = step, system, bound
        self.tables: set[str] = set()
        self._dsa: dict[str, tuple] = {}

    def __call__(self, op):
        decode = self.step.phase == "decode"
        if op.kind == "alltoall":
            return self._alltoall(op, decode)
        mixer = self._mixer(op)
        if op.kind == "linear":
            return self._linear(op, mixer, decode)
        if op.kind in ("mla", "indexer") and mixer is not None and mixer.kind == MLA:
            if mixer.index_heads and mixer.index_topk:
                return self._dsa_share(op, mixer, decode)
            if op.kind == "mla":
                return self._mla(op, mixer, decode)
        raise CalcInputError("system", f"no measured table for {op.name} (measured: MLA, DSA, Gated DeltaNet, KDA)")

    # ---- helpers
    def _mixer(self, op):
        mixers = self.step.layout.mixers
        hit = next((m for m in mixers if m.name == op.group), None)
        if hit is None:        # an op of the MTP module: the mixer it copies
            kinds = (LINEAR,) if op.kind == "linear" else (MLA,)
            hit = next((m for m in mixers if m.kind in kinds), None)
        return hit

    def _weight_dtype(self, op) -> str:
        proj = next((o for o in self.step.ops if o.kind == "gemm" and o.group == op.group and o.name.endswith("attn_proj")), None)
        return proj.dtype if proj is not None else "bf16"

    def _used(self, *tables: str) -> None:
        self.tables.update(t for t in tables if t in self.system.tables)

    @staticmethod
    def _geometry(mixer) -> MlaGeometry:
        nope = mixer.head_dim - mixer.rope_dim
        return MlaGeometry(0, 0, mixer.kv_lora, nope, mixer.rope_dim, mixer.v_dim, mixer.index_heads, mixer.index_dim)

    def _prefix(self, op, lat, st):
        """Prefill after a cached prefix: the tables hold prompts without one; scaled by causal (query, key) pairs."""
        p, s = (np.asarray(op.shape[k], dtype=float) for k in ("p", "s"))
        ratio = causal_pairs(p, s) / causal_pairs(p, 0.0)
        return lat * ratio, np.where(s > 0, np.maximum(st, HOLE), st)

    # ---- MLA
    def _mla(self, op, mixer, decode: bool):
        sh = op.shape
        b, p, s, h = (np.asarray(sh[k], dtype=float) for k in ("b", "p", "s", "heads"))
        g = self._geometry(mixer)
        if self.system.framework == "vllm":
            table = "mla_generation_module_perf" if decode else "mla_context_module_perf"
            lat, st = module_core_kernel(self.system, table, decode, b, s + 1 if decode else p, h, op.dtype,
                                         self._weight_dtype(op), MLA_MODULE_GEOMETRY)
            self._used(table, "gemm_perf", "mla_bmm_perf")
            if (g.kv_lora, g.rope) != (MLA_MODULE_GEOMETRY.kv_lora, MLA_MODULE_GEOMETRY.rope):
                kvb = 1.0 if _kv(op.dtype) == "fp8" else 2.0
                q = (b, s + 1 if decode else p, h)
                lat = lat * mla_core_bound_s(*q, g, kvb, self.system.rates, decode) / \
                    mla_core_bound_s(*q, MLA_MODULE_GEOMETRY, kvb, self.system.rates, decode)
                st = np.maximum(st, HOLE)
        else:
            lat, st = mla_core_kernel(self.system, decode, b, s + 1 if decode else p, h, op.dtype, g)
            self._used("generation_mla_perf" if decode else "context_mla_perf")
        if decode:
            # one token per sequence was measured: more (speculative verification) scale with the tokens
            lat, st = lat * p, np.where(p > 1, np.maximum(st, HOLE), st)
        else:
            lat, st = self._prefix(op, lat, st)
        return lat, st

    # ---- DSA
    def _dsa_share(self, op, mixer, decode: bool):
        if op.group not in self._dsa:
            self._dsa[op.group] = self._dsa_module(op, mixer, decode)
        remainder, st, core_b, index_b = self._dsa[op.group]
        mine = core_b if op.kind == "mla" else index_b
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(core_b + index_b > 0, mine / (core_b + index_b), 0.5)
        return remainder * share, st

    def _dsa_module(self, op, mixer, decode: bool):
        ops = [o for o in self.step.ops if o.group == op.group and o.kind in ("mla", "indexer")]
        core = next(o for o in ops if o.kind == "mla")
        index = next((o for o in ops if o.kind == "indexer"), None)
        sh = core.shape
        b, p, s, h = (np.asarray(sh[k], dtype=float) for k in ("b", "p", "s", "heads"))
        want = (mixer.head_dim, mixer.v_dim, mixer.index_heads)
        arch = min(DSA_GEOMETRY, key=lambda a: sum(abs(np.log(x / y)) for x, y in
                                                   zip((DSA_GEOMETRY[a].nope + DSA_GEOMETRY[a].rope, DSA_GEOMETRY[a].v,
                                                        DSA_GEOMETRY[a].index_heads), want)))
        table = "dsa_generation_module_perf" if decode else "dsa_context_module_perf"
        lat, st = module_core_kernel(self.system, table, decode, b, s + 1 if decode else p, h, core.dtype,
                                     self._weight_dtype(core), DSA_GEOMETRY[arch], arch)
        self._used(table, "gemm_perf", "mla_bmm_perf")
        g = DSA_GEOMETRY[arch]
        if (g.nope + g.rope, g.v, g.index_heads) != want:
            st = np.maximum(st, HOLE)       # another model's block: its efficiency, this model's bounds share it
        if decode:
            lat, st = lat * p, np.where(p > 1, np.maximum(st, HOLE), st)
        else:
            lat, st = self._prefix(core, lat, st)
        core_b = np.asarray(self.bound(core), dtype=float)
        index_b = np.asarray(self.bound(index), dtype=float) if index is not None else 0.0 * core_b
        if (g.nope + g.rope, g.v, g.index_heads) != want:
            kvb = 1.0 if _kv(core.dtype) == "fp8" else 2.0
            q = (b, s + 1 if decode else p, h)
            lat = lat * mla_core_bound_s(*q, self._geometry(mixer), kvb, self.system.rates, decode) / \
                mla_core_bound_s(*q, g, kvb, self.system.rates, decode)
        return lat, st, core_b, index_b

    # ---- linear attention
    def _linear(self, op, mixer, decode: bool):
        table = {"gated-deltanet": "gdn_perf", "kda": "kda_perf"}.get(mixer.linear_kind if mixer is not None else "")
        if table is None:
            raise CalcInputError("system", f"no measured table of {mixer.linear_kind if mixer else op.name} state updates")
        b, p = np.broadcast_arrays(*(np.asarray(op.shape[k], dtype=float) for k in ("b", "p")))
        dk, dv = mixer.head_dim or 128, mixer.v_dim or 128
        # value heads on the rank, from the op itself (its FLOPs are 6 × tokens × the rank's dk·dv state per head),
        # so that stacked splits of different tensor-parallel degrees each read their own
        with np.errstate(divide="ignore", invalid="ignore"):
            v_heads = np.round(np.asarray(op.flops, dtype=float) / (6.0 * b * p * dk * dv), 6)
        v_heads = np.broadcast_to(np.where(np.isfinite(v_heads) & (v_heads > 0), v_heads, mixer.heads), b.shape)
        lat, st = np.zeros(b.shape), np.zeros(b.shape, dtype=np.int8)
        for hv in np.unique(v_heads):
            sel = v_heads == hv
            l_, s_ = linear_state_kernel(self.system, table, decode, b[sel], p[sel], float(hv), self.step.layout.d, dk, dv)
            lat[sel], st[sel] = l_, s_
        self._used(table)
        if decode:
            lat, st = lat * p, np.where(p > 1, np.maximum(st, HOLE), st)
        return lat, st

    # ---- all-to-all
    def _alltoall(self, op, decode: bool):
        lay = self.step.layout
        # the experts are spread over the all-to-all's ranks, each holding the tokens of 1/gpus of the sequences
        gpus = np.maximum(np.asarray(op.shape.get("gpus", self.step.split.ep), dtype=float), 2.0)
        tokens = np.ceil(np.asarray(self.step.batch, dtype=float) / gpus) * np.asarray(self.step.new_tokens, dtype=float)
        lat, st = alltoall_kernel(self.system, decode, tokens, lay.d, lay.top_k, lay.experts, gpus)
        self._used("wideep_deepep_ll_perf" if decode else "wideep_deepep_normal_perf", "moe_a2a_perf")
        return lat, st
