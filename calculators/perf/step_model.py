"""The step model: one decode or prefill step of any model as a list of operations on one rank.

From a `Layout` (`calculators.domain.layout`: every layer group's mixer and FFN) and a `Split` (tensor, expert
and pipeline parallel degrees, attention data parallelism), `step_ops` lists what one rank runs in one step:

- per mixer group: the projection GEMMs; the attention core (full, sliding-window or chunked keys; MLA in the
  latent space at decode; DSA's indexer over every key and the main attention over its top-k; V4's windowed
  plus compressed keys) or the recurrent-state update of a linear-attention layer;
- per FFN layer: the dense gate/up and down GEMMs, or the router, the routed experts of the rank and the
  shared experts;
- norms and residual traffic, the LM head for every position that needs logits;
- the collectives the split needs: two all-reduces per layer under TP; with attention data parallelism
  (`dp_attention`: every rank runs the whole attention for its own 1/tp of the sequences) the all-to-all
  dispatch and combine per MoE layer when the experts are spread over all ranks (ep = tp), else the gather of
  every rank's tokens before an FFN sliced over the ranks and the scatter of its output after; the pipeline
  hand-offs;
- optionally the multi-token-prediction (MTP) modules a model ships (`mtp_drafts`): each is one more decoder
  layer (one of the model's full-attention or MLA layers with its FFN, plus the projection of [embedding;
  hidden] back to d) and the shared LM head, run once per step for one draft token per sequence (over the whole
  prompt at prefill).

Every op carries FLOPs and bytes per call (weights in their own format, KV/state in the cache format,
activations in BF16), its call count and the shape its measured kernel is looked up by. MoE reads only the
experts the step's tokens touch: E·(1 − (1 − k/E)^T) of E under uniform routing (`touched_experts`). A routing
skew (`expert_skew` s > 0) makes expert popularity Zipf-like, p_e ∝ e^(−s): a token takes k distinct experts
by successive sampling with those weights, and expert e is among them with probability q_e ≈ 1 − exp(−t·p_e),
t set so that Σ q_e = k (Rosén's order-sampling approximation of the inclusion probabilities; exact at s = 0).
Tokens route independently, so T tokens touch Σ_e 1 − (1 − q_e)^T distinct experts. Under expert parallelism
the experts are dealt round-robin to the ranks in order of popularity, and the hottest rank (the one receiving
the most token–expert assignments) sets the MoE time: its tokens, its touched experts (`routing_load`).
`calculators.perf.step_eval` turns the list into the bound and the measured estimate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from calculators.domain import FORMATS, Fmt, resolve_format
from calculators.domain import ATTENTION, COMPRESSED, LINEAR, MLA, Layout, layout_ledger
from calculators.framework import CalcInputError
from calculators.perf.step_terms import causal_pairs

#: activations and collectives move BF16 values
ACT_BYTES = 2.0
#: recurrent state is kept in FP32
STATE_BYTES = 4.0


@dataclass(frozen=True)
class Split:
    """How one replica is split: `tp` ranks per stage (attention heads, FFN width; with `dp_attention` the attention
    runs data-parallel over those ranks instead), `ep` of them hold disjoint experts (the rest slice each expert,
    moe_tp = tp / ep), and `pp` pipeline stages."""

    tp: int = 1
    ep: int = 1
    pp: int = 1
    dp_attention: bool = False

    @property
    def moe_tp(self) -> int:
        return max(self.tp // self.ep, 1)

    @property
    def attention_tp(self) -> int:
        return 1 if self.dp_attention else self.tp


def split_problems(lay: Layout, s: Split) -> list[str]:
    """Why a split is invalid for a layout (empty when it is valid)."""
    why = []
    if s.tp < 1 or s.ep < 1 or s.pp < 1:
        why.append("tp, ep and pp must be ≥ 1")
    at = s.attention_tp
    for m in lay.mixers:
        if m.kind in (ATTENTION, MLA, COMPRESSED) and m.heads % at:
            why.append(f"tp {at} does not divide the {m.heads} attention heads")
            break
        if m.kind == ATTENTION and not (m.kv_heads % at == 0 or at % m.kv_heads == 0):
            why.append(f"tp {at} neither divides nor is a multiple of the {m.kv_heads} KV heads")
            break
        if m.kind == LINEAR and m.heads % at:
            why.append(f"tp {at} does not divide the {m.heads} linear-attention heads")
            break
    if s.ep > 1:
        if not lay.experts:
            why.append("expert parallelism needs a MoE model")
        elif lay.experts % s.ep:
            why.append(f"ep {s.ep} does not divide the {lay.experts} experts")
        elif s.tp % s.ep:
            why.append(f"ep {s.ep} does not divide tp {s.tp} (experts are placed inside the TP group)")
    if s.pp > lay.layers:
        why.append(f"pp {s.pp} exceeds the {lay.layers} layers")
    return why


def touched_experts(experts: Any, top_k: Any, tokens: Any, skew: float = 0.0) -> np.ndarray:
    """Expected distinct experts that `tokens` tokens, each routed to `top_k` of `experts`, touch: uniformly
    (skew 0), else with Zipf popularity of exponent `skew` (see the module docstring)."""
    if skew > 0:
        return routing_load(experts, top_k, tokens, 1, skew)[0]
    e = np.asarray(experts, dtype=float)
    k = np.minimum(np.asarray(top_k, dtype=float), e)
    return e * (1.0 - (1.0 - k / e) ** np.asarray(tokens, dtype=float))


@lru_cache(maxsize=64)
def _inclusion(experts: int, top_k: int, skew: float) -> np.ndarray:
    """q_e: the probability that one token's k distinct experts include expert e (in popularity order), for
    Zipf weights p_e ∝ e^(−skew): 1 − exp(−t·p_e) with t solved by bisection so that Σ q_e = k."""
    p = np.arange(1, experts + 1, dtype=float) ** -float(skew)
    p /= p.sum()
    k = min(float(top_k), float(experts))
    if k >= experts:
        return np.ones(experts)
    lo, hi = 0.0, float(experts)
    while np.sum(-np.expm1(-hi * p)) < k:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.sum(-np.expm1(-mid * p)) < k else (lo, mid)
    q = -np.expm1(-hi * p)
    return q * (k / q.sum())


def routing_load(experts: Any, top_k: Any, tokens: Any, ep: int = 1, skew: float = 0.0) -> tuple[np.ndarray, float]:
    """(distinct experts the hottest of `ep` expert-parallel ranks expects `tokens` tokens to touch, the share of
    all token–expert assignments that rank receives). Uniform routing: (E/ep·(1 − (1 − k/E)^T), 1/ep). With a
    skew, experts are dealt round-robin in order of popularity, so rank 0 holds the most popular one."""
    E, k = int(experts), int(top_k)
    if skew <= 0:
        return touched_experts(E, k, tokens) / ep, 1.0 / ep
    q = _inclusion(E, k, float(skew))[::max(int(ep), 1)]
    t = np.asarray(tokens, dtype=float)
    uniq, inv = np.unique(t.ravel(), return_inverse=True)
    touched = np.sum(-np.expm1(uniq[:, None] * np.log1p(-np.minimum(q, 1.0 - 1e-16))[None, :]), axis=1)
    return touched[inv].reshape(t.shape), float(q.sum() / min(k, E))


@dataclass
class Op:
    """One operation of a step on one rank: per call FLOPs and bytes (arrays over the query points)."""

    name: str
    kind: str              # gemm | attention | mla | indexer | linear | moe | elementwise | allreduce | alltoall | p2p
    group: str
    count: float           # calls per step on this rank (layers)
    flops: Any
    bytes: Any
    dtype: str = "bf16"    # the precision whose peak it runs against (weights' format for GEMMs)
    shape: dict = field(default_factory=dict)


@dataclass
class StepOps:
    phase: str
    split: Split
    ops: list[Op]
    batch: np.ndarray      # sequences in the step (whole replica)
    new_tokens: np.ndarray
    context_tokens: np.ndarray
    notes: list[str]
    layout: Layout

    @property
    def shape(self) -> tuple[int, ...]:
        return np.broadcast_shapes(np.shape(self.batch), np.shape(self.new_tokens), np.shape(self.context_tokens))


def _keys_pairs(p, s, window):
    """(keys each new query sees at most, (query, key) pairs) for p new tokens after s cached, with a window."""
    keys = s + p if window is None else np.minimum(s + p, float(window))
    return keys, causal_pairs(p, s, window)


def step_ops(lay: Layout, phase: str, batch: Any, new_tokens: Any, context_tokens: Any, split: Split = Split(),
             weight_format: Callable[[str], Fmt] | Fmt | str | None = None, kv_format: Fmt | str | None = None,
             include_lm_head: bool = True, expert_skew: float = 0.0, mtp_drafts: int = 0) -> StepOps:
    """The operations one rank runs in one step (see the module docstring). `weight_format` is one format or a
    function component → format (the shipped formats of a mixed checkpoint); the KV cache defaults to BF16.
    `expert_skew` is the Zipf exponent of expert popularity (0: uniform routing); `mtp_drafts` > 0 adds that many
    passes of the model's MTP module (the caller sets `new_tokens` to the 1 + drafts positions a decode step
    verifies)."""
    problems = split_problems(lay, split)
    if problems:
        raise CalcInputError("tp", "; ".join(problems))
    wf = weight_format if callable(weight_format) else (lambda c, f=resolve_format(weight_format or "bf16"): f)
    kf = kv_format if isinstance(kv_format, Fmt) else resolve_format(kv_format or "bf16", "kv_format")
    b, p, s = np.broadcast_arrays(*[np.asarray(x, dtype=float) for x in (batch, new_tokens, context_tokens)])
    if np.any(b < 1) or np.any(p < 1) or np.any(s < 0):
        raise CalcInputError("batch", "batch and tokens must be ≥ 1 and context_tokens ≥ 0")
    at, tp, d = split.attention_tp, split.tp, float(lay.d)
    dp = tp if split.dp_attention else 1
    b_r = np.ceil(b / dp)                      # sequences on this rank's attention
    tok_r = b_r * p                            # tokens through this rank's attention and norms
    tok_all = b * p                            # tokens every MoE layer of the group sees
    ops: list[Op] = []
    notes: list[str] = list(lay.notes)
    wbytes = lambda comp: resolve_format(wf(comp)).effective_bits / 8.0
    kvb = kf.effective_bits / 8.0

    def gemm(name: str, group: str, comp: str, m, n, k, count, replicated: bool = False) -> None:
        fmt = resolve_format(wf(comp)) if comp != "router" else FORMATS["bf16"]     # routers stay in BF16
        ops.append(Op(name, "gemm", group, count, 2.0 * m * n * k, n * k * fmt.effective_bits / 8.0 + (m * k + m * n) * ACT_BYTES,
                      fmt.name, {"m": m, "n": n, "k": k, "replicated": replicated}))

    for g in lay.mixers:
        c = g.count
        if g.kind == ATTENTION:
            h_r, kv_r = g.heads / at, math.ceil(g.kv_heads / at)
            gemm("qkv_proj", g.name, "attention", tok_r, (h_r + kv_r) * g.head_dim + kv_r * g.v_dim, d, c)
            keys, pairs = _keys_pairs(p, s, g.window)
            fl = 2.0 * b_r * pairs * h_r * (g.head_dim + g.v_dim)
            cached = np.minimum(s, g.window) if g.window is not None else s
            by = b_r * (cached + p) * kv_r * (g.head_dim + g.v_dim) * kvb + 2.0 * tok_r * h_r * (g.head_dim + g.v_dim) * ACT_BYTES
            ops.append(Op("attention", "attention", g.name, c, fl, by, kf.name,
                          {"b": b_r, "p": p, "s": s, "keys": keys, "pairs": pairs, "heads": h_r, "kv_heads": kv_r,
                           "head_dim": g.head_dim, "window": g.window}))
            gemm("o_proj", g.name, "attention", tok_r, d, h_r * g.v_dim, c)
        elif g.kind in (MLA, COMPRESSED):
            h_r = g.heads / at
            proj = g.params / at
            # MLA: down-projections are replicated on every rank, up/out-projections split by heads (as in vLLM)
            gemm("attn_proj", g.name, "attention", tok_r, proj / d, d, c)
            if g.kind == MLA:
                keys, pairs = _keys_pairs(p, s, None)
                sel_keys = np.minimum(keys, g.index_topk) if g.index_topk else keys
                sel_pairs = np.minimum(pairs, p * g.index_topk) if g.index_topk else pairs
                # decode in the latent space (the weight-absorbed form): QK over kv_lora + rope, AV over kv_lora
                per_pair = (g.kv_lora + g.rope_dim + g.kv_lora) if phase == "decode" else (g.head_dim + g.v_dim)
                fl = 2.0 * b_r * sel_pairs * h_r * per_pair
                by = b_r * np.minimum(s + p, sel_keys + p) * (g.kv_lora + g.rope_dim) * kvb
                ops.append(Op("mla_attention", "mla", g.name, c, fl, by, kf.name,
                              {"b": b_r, "p": p, "s": s, "keys": sel_keys, "heads": h_r}))
                if g.index_heads:
                    ops.append(Op("dsa_indexer", "indexer", g.name, c, 2.0 * b_r * pairs * g.index_heads * g.index_dim,
                                  b_r * keys * g.index_dim * min(kvb, 1.0), "fp8", {"b": b_r, "keys": keys}))
            else:
                w_keys, w_pairs = _keys_pairs(p, s, g.window)
                comp_keys = (s + p) / g.key_ratio
                if g.index_topk:
                    comp_keys = np.minimum(comp_keys, g.index_topk)
                    ops.append(Op("csa_indexer", "indexer", g.name, c,
                                  2.0 * b_r * p * (s + p) / g.key_ratio * g.index_heads * g.index_dim,
                                  b_r * (s + p) / g.key_ratio * g.index_dim * min(kvb, 1.0), "fp8", {"b": b_r}))
                fl = 2.0 * b_r * (w_pairs + p * comp_keys) * h_r * (g.head_dim + g.v_dim)
                by = b_r * (np.minimum(s + p, g.window or 0) + comp_keys) * g.head_dim * kvb
                ops.append(Op("compressed_attention", "mla", g.name, c, fl, by, kf.name, {"b": b_r, "keys": w_keys + comp_keys}))
        else:   # linear / recurrent
            st_r = g.state_elements / at
            gemm("linear_attn_proj", g.name, "attention", tok_r, g.params / at / d, d, c)
            fl = 6.0 * tok_r * st_r
            by = 2.0 * b_r * st_r * STATE_BYTES + 4.0 * tok_r * (g.heads / at) * max(g.v_dim, 1) * ACT_BYTES
            ops.append(Op(f"{g.linear_kind}_state", "linear", g.name, c, fl, by, "bf16", {"b": b_r, "p": p}))
    # norms and residual adds: read and write the hidden state a few times per layer
    ops.append(Op("norms_residual", "elementwise", "every layer", lay.layers, 10.0 * tok_r * d, 6.0 * tok_r * d * ACT_BYTES,
                  "bf16", {}))
    # attention data parallelism: MoE layers whose experts are spread over every rank exchange tokens by
    # all-to-all (shared experts then run replicated, on each rank's own tokens); every other FFN gathers the
    # tokens of all ranks, runs sliced over them and scatters its output back
    dp_a2a = split.dp_attention and tp > 1 and bool(lay.moe_layers) and split.ep == tp
    m_ffn = tok_all if split.dp_attention else tok_r
    if lay.dense_layers and lay.ffn:
        f_r = lay.ffn / tp
        gemm("ffn_gate_up", "dense FFN", "dense_ffn", m_ffn, 2.0 * f_r, d, lay.dense_layers)
        gemm("ffn_down", "dense FFN", "dense_ffn", m_ffn, d, f_r, lay.dense_layers)
    share = 1.0
    if lay.moe_layers:
        E, k, moe_tp, ep = lay.experts, lay.top_k, split.moe_tp, split.ep
        tok_m = tok_all
        gemm("router", "MoE", "router", tok_m if not split.dp_attention else tok_r, float(E), d, lay.moe_layers, True)
        # the hottest of the ep ranks holding E/ep experts each: the experts its tokens touch and its share of the
        # T·k token–expert assignments (1/ep and E/ep·(1 − (1 − k/E)^T) under uniform routing)
        per_rank, share = routing_load(E, k, tok_m, ep, expert_skew)
        eb = wbytes("routed_experts")
        fl = 2.0 * tok_m * k * share * lay.expert_params / moe_tp
        by = per_rank * lay.expert_params / moe_tp * eb + (tok_m * k * share) * d * ACT_BYTES * 2.0
        ops.append(Op("moe_experts", "moe", "MoE", lay.moe_layers, fl, by, resolve_format(wf("routed_experts")).name,
                      {"tokens": tok_m * share * ep, "hidden": d, "inter": lay.expert_ffn, "topk": k, "experts": E,
                       "tp": moe_tp, "ep": ep, "touched": per_rank}))
        if lay.shared_ffn:
            sf = lay.shared_ffn / (1 if dp_a2a else tp)
            m = tok_r if dp_a2a else m_ffn
            gemm("shared_gate_up", "MoE", "shared_experts", m, 2.0 * sf, d, lay.moe_layers)
            gemm("shared_down", "MoE", "shared_experts", m, d, sf, lay.moe_layers)
    if include_lm_head:
        logits = (b * p) if phase == "decode" else b
        gemm("lm_head", "head", "lm_head" if not lay.tied else "embeddings", logits, lay.vocab / tp, d, 1)
    # collectives
    msg = tok_r * d * ACT_BYTES
    if tp > 1 and not split.dp_attention:
        ops.append(Op("allreduce", "allreduce", "every layer", 2 * lay.layers, 0.0 * msg, msg, "bf16",
                      {"bytes": msg, "gpus": tp}))
    if split.dp_attention and tp > 1:
        if dp_a2a:
            # dispatch and combine: the hottest rank receives its share of every other rank's tok_r·k assignments
            a2a = tok_r * lay.top_k * d * ACT_BYTES * share * (tp - 1)
            ops.append(Op("moe_dispatch_combine", "alltoall", "MoE", 2 * lay.moe_layers, 0.0 * msg, a2a, "bf16",
                          {"bytes": a2a, "gpus": tp}))
        # gather before, scatter after: together the traffic of one all-reduce of every rank's tokens
        gathered = lay.dense_layers + (0 if dp_a2a else lay.moe_layers)
        if gathered:
            ops.append(Op("dp_gather_scatter", "allreduce", "FFN", gathered, 0.0 * msg, msg * tp, "bf16",
                          {"bytes": msg * tp, "gpus": tp}))
    if split.pp > 1:
        ops.append(Op("pp_handoff", "p2p", "pipeline", split.pp - 1, 0.0 * msg, b * p * d * ACT_BYTES, "bf16",
                      {"bytes": b * p * d * ACT_BYTES}))
        if lay.layers % split.pp:
            notes.append(f"{lay.layers} layers over {split.pp} stages: the largest stage holds {math.ceil(lay.layers / split.pp)} "
                         "layers (the pipeline runs at the pace of that stage).")
    if lay.moe_layers:
        if expert_skew > 0:
            notes.append(f"MoE: skewed routing (Zipf exponent {expert_skew:g}); the hottest of {split.ep} expert rank(s) "
                         f"receives {100 * share:.1f} % of the token–expert assignments (uniform: {100 / split.ep:.1f} %) "
                         "and sets the MoE time.")
        else:
            notes.append("MoE: uniform routing; a step reads only the experts its tokens touch, E·(1 − (1 − k/E)^T) of E "
                         "(per rank E/ep·(1 − (1 − k/E)^T) with expert parallelism).")
    if mtp_drafts > 0:
        if not lay.mtp_layers:
            raise CalcInputError("mtp", f"{lay.name} has no multi-token-prediction module")
        sub = mtp_layout(lay)
        p_mtp = np.ones_like(p) if phase == "decode" else p
        extra = step_ops(sub, phase, b, p_mtp, s, Split(tp, split.ep, 1, split.dp_attention), wf, kf,
                         include_lm_head, expert_skew)
        gemm("mtp_eh_proj", "MTP", "attention", b_r * p_mtp, d, 2.0 * d, mtp_drafts)
        ops.extend(replace(op, name=f"mtp_{op.name}", group="MTP", count=op.count * mtp_drafts) for op in extra.ops)
        notes.append(f"MTP: {mtp_drafts} pass(es) of the multi-token-prediction module per step (one {sub.mixers[0].kind} "
                     "layer with its FFN, the [embedding; hidden] projection and the shared LM head).")
    return StepOps(phase, split, ops, b, p, s, notes, lay)


def mtp_layout(lay: Layout) -> Layout:
    """One multi-token-prediction module as a one-layer layout: the model's first full-attention (or MLA, or
    compressed) mixer with its FFN (MoE when the model's layers are), embeddings and LM head shared with the model."""
    cached = lay.__dict__.get("_mtp")
    if cached is not None:
        return cached
    pick = (next((m for m in lay.mixers if m.kind in (MLA, COMPRESSED) or (m.kind == ATTENTION and m.window is None)), None)
            or lay.mixers[0])
    moe = bool(lay.moe_layers)
    sub = replace(lay, name=f"{lay.name} MTP", layers=1, mixers=(replace(pick, name=f"MTP {pick.name}", count=1),),
                  ffn_layers=1, dense_layers=0 if moe else 1, moe_layers=1 if moe else 0, mtp_layers=0, notes=(),
                  published_total=None, published_active=None)
    lay.__dict__["_mtp"] = sub      # frozen: kept beside the fields, built once per layout
    return sub


def weight_bytes_per_rank(lay: Layout, split: Split, weight_format: Callable[[str], Fmt] | Fmt | str | None = None,
                          mtp: bool = False) -> dict:
    """Weight bytes on one rank of a split, by component (experts over ep·moe_tp, the rest over tp or replicated;
    stages take 1/pp), plus the whole model's. With `mtp`, the model's MTP modules are counted too (component
    `mtp`, on the last stage: their own layer and projection; embeddings and LM head are shared)."""
    wf = weight_format if callable(weight_format) else (lambda c, f=resolve_format(weight_format or "bf16"): f)
    comp = layout_ledger(lay)["components"]
    byts = {c: float(v) * resolve_format(wf(c)).effective_bits / 8.0 for c, v in comp.items()}
    tp, at = split.tp, split.attention_tp
    dp_a2a = split.dp_attention and tp > 1 and bool(lay.moe_layers) and split.ep == tp
    div = {"attention": at, "dense_ffn": tp, "routed_experts": split.ep * split.moe_tp,
           "shared_experts": 1 if dp_a2a else tp, "router": 1, "norms": 1, "embeddings": tp, "lm_head": tp}
    per_rank = {c: v / div[c] / (split.pp if c not in ("embeddings", "lm_head") else 1) for c, v in byts.items()}
    if mtp and lay.mtp_layers:
        # the [embedding; hidden] → d projection is replicated on every rank (as vLLM and SGLang load it)
        one = weight_bytes_per_rank(mtp_layout(lay), replace(split, pp=1), wf)
        own = [c for c in one["components"] if c not in ("embeddings", "lm_head")]
        proj = 2.0 * lay.d * lay.d * resolve_format(wf("attention")).effective_bits / 8.0
        byts["mtp"] = lay.mtp_layers * (sum(one["components"][c] for c in own) + proj)
        per_rank["mtp"] = lay.mtp_layers * (sum(one["components_per_rank"][c] for c in own) + proj)
    return {"total": sum(byts.values()), "per_rank": sum(per_rank.values()), "components": byts,
            "components_per_rank": per_rank}


__all__ = ["ACT_BYTES", "Op", "STATE_BYTES", "Split", "StepOps", "mtp_layout", "routing_load", "split_problems",
           "step_ops", "touched_experts", "weight_bytes_per_rank"]
