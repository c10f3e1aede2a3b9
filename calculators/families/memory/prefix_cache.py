"""Prefix caching: KV stored once instead of per request, prefill skipped, TTFT and input cost saved.

`requests` requests share a prefix of `prefix_tokens` tokens. The first one computes it and its KV
becomes the cache entry; each later request finds it with probability `prefix_hit_rate` (a miss computes
and holds its own copy). Expected values over the hit rate:

    hits            = prefix_hit_rate × (requests − 1)
    KV stored       = prefix KV × [1 + (1 − prefix_hit_rate)(requests − 1)] + state snapshots
    KV saved        = prefix KV × hits − state snapshots          (vs. every request holding a copy)
    prefill skipped = hits × prefill FLOPs of the reusable prefix

Recurrent (KDA/SSM) layers can only resume from a saved state snapshot: with a checkpoint every
`state_checkpoint_interval_tokens`, reuse stops at the last checkpoint at or below the prefix, and
the rest is recomputed (the book's hybrid-prefix-state case).
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_flops, fmt_s, FractionSweep,
    Lookup, NonNegFloat, NonNegInt, NonNegIntSweep, num, out, Outputs, OutSweep, PosFloat, PosFloatSweep,
    PosIntSweep, Profile, request_inputs, Result,
)
from calculators.domain import (
    Architecture, FormatField, GroupSpec, hardware_rates, intify, kv_sizes, kv_source, matrix_params, MODEL_CONFIG_FIELD,
    PricePerMtok, resolve_format, SPLIT_ATTENTION,
)
from calculators.perf import causal_pairs
from calculators.framework import headline as hf


class PrefixCacheRequest(CalcRequest):
    """A shared prefix reused by `requests` requests."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id (KV layout, parameters, heads).", examples=["llama-3.1-70b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    architecture: Architecture | None = Field(None, description="Explicit layer groups (kv-cache form) instead of `model` / `model_config`.")
    kv_bytes_per_token: NonNegFloat | None = Field(None, description="KV bytes per prefix token, instead of a model.", examples=[327680])
    kv_format: FormatField = Field("bf16", description="Cache format (as in kv-cache).", examples=["fp16"])
    state_format: FormatField = Field("fp32", description="Recurrent state format (as in kv-cache).")
    tp: Annotated[int, Field(ge=1, le=4096)] | None = Field(None, description="Tensor-parallel ranks: adds per-device "
                                                            "bytes, and the prefill runs on all of them.")
    prefix_tokens: NonNegIntSweep = Field(description="Shared prefix length, tokens. Sweepable.", examples=[2000])
    requests: PosIntSweep = Field(2, description="Requests sharing the prefix, including the one that fills the cache. Sweepable.",
                                  examples=[100])
    prefix_hit_rate: FractionSweep = Field(1.0, description="Probability that a later request finds the prefix cached "
                                           "(0..1). Sweepable.", examples=[0.9])
    block_size_tokens: Annotated[int, Field(ge=1, le=10**9)] | None = Field(
        None, description="Reuse granularity: only whole blocks of this many tokens are matched.", examples=[16])
    state_checkpoint_interval_tokens: PosIntSweep | None = Field(
        None, description="Recurrent-state snapshot every this many tokens (hybrid models). Sweepable.", examples=[4096])
    params: PosFloat | None = Field(None, description="Parameters used per token for prefill FLOPs = 2·params·tokens "
                                    "(default: the model's matrix parameters a token multiplies, from its shapes; no "
                                    "LM head, since prefix tokens need no logits).", examples=[70e9])
    prefill_flops_per_token: NonNegFloat | None = Field(None, description="Linear prefill FLOPs per token, instead of 2·params.")
    attention_flops_per_pair: NonNegFloat | None = Field(
        None, description="Attention FLOPs per causal (query, key) pair summed over layers (default for GQA/MHA models: "
        "4·heads·head_dim per full-attention layer; 0 when unknown).")
    prefill_tokens_per_s: PosFloatSweep | None = Field(None, description="Prefill rate, tokens/s: TTFT saved = tokens skipped / rate. Sweepable.",
                                                       examples=[5000])
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: its sourced peak at "
                                 "`precision` is the prefill device's peak (instead of `peak_flop_per_s`).",
                                 examples=["h100-sxm"])
    precision: str = Field("BF16", max_length=10, description="Peak row precision with `hardware`.")
    sparsity: Literal["dense", "structured"] = Field("dense", description="Peak row sparsity with `hardware` (dense "
                                                     "unless asked).")
    peak_flop_per_s: PosFloatSweep | None = Field(None, description="Peak FLOP/s of one prefill device, instead of "
                                                  "`hardware`: TTFT saved = FLOPs skipped / (peak × tp × "
                                                  "compute_efficiency). Sweepable.")
    compute_efficiency: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(
        1.0, description="Fraction of the peak the prefill reaches (default 1: the TTFT saved at the peak rate, a lower "
        "bound).", examples=[0.5])
    new_input_tokens: NonNegInt = Field(0, description="Input tokens after the prefix in each request (for input cost).", examples=[2000])
    price_per_million_tokens_usd: PricePerMtok | None = Field(None, description="Input prices per million tokens, to "
                                                              "compare cached and uncached billing.")


def _attention_terms(req, rec: dict | None, groups: list[GroupSpec] | None, res: Result) -> list[tuple[float, int | None]] | None:
    """(FLOPs per pair summed over layers, window) per attention stream; None when not known."""
    if req.attention_flops_per_pair is not None:
        return [(req.attention_flops_per_pair, None)]
    if rec is None or groups is None or str((rec.attention or "")).lower() not in SPLIT_ATTENTION:
        return None
    heads = rec.value("heads", required=False)
    head_dim = rec.value("head_dim", required=False)
    if not heads or not head_dim:
        return None
    res.cite(rec.source("heads"))
    res.cite(rec.source("head_dim"))
    per_layer = 4.0 * heads * head_dim
    return [(g.count * per_layer, s.window) for g in groups for s in g.streams]


#: a number, or one per point when an input is swept (null where not finite)
#: a whole count of tokens or snapshots, or one per point
PrefixCount = int | list[int]


class PrefixCacheOutputs(Outputs):
    """Outputs of prefix-cache: expected values over the hit rate; lists where an input is swept. The KV part needs a
    KV source, the prefill part a parameter count or FLOPs per token, TTFT a prefill rate or a peak, costs
    `price_per_million_tokens_usd`."""

    prefix_tokens: PrefixCount = Field(description="Shared prefix length, tokens.")
    restore_point_tokens: PrefixCount = Field(description="Tokens a hit can reuse: the last block / state-checkpoint "
                                              "boundary at or below the prefix, tokens.")
    recompute_tokens: PrefixCount = Field(description="Prefix tokens after the restore point that a hit still "
                                          "recomputes, tokens.")
    expected_hits: OutSweep = Field(description="Expected later requests that find the prefix cached, "
                                     "prefix_hit_rate × (requests − 1).")
    state_checkpoints: PrefixCount | None = Field(None, description="Recurrent-state snapshots within the prefix, "
                                                  "floor(prefix / interval) (with state_checkpoint_interval_tokens).")
    kv_bytes_per_token: float | None = Field(None, description="KV bytes per token of the full-history streams, "
                                             "B/token (with a KV source).")
    prefix_kv_bytes: OutSweep = Field(None, description="KV of one copy of the prefix (history, no state), B.")
    state_bytes: float | None = Field(None, description="Recurrent state of one request, B (0 without recurrent layers).")
    state_snapshot_bytes: OutSweep = Field(None, description="State snapshots kept with the cache entry, B.")
    cache_entry_bytes: OutSweep = Field(None, description="One cache entry: prefix KV + state snapshots, B.")
    kv_bytes_without_sharing: OutSweep = Field(None, description="Every request holding its own copy of the prefix, B.")
    kv_bytes_with_sharing: OutSweep = Field(None, description="Expected KV stored with the cache (misses hold their "
                                             "own copy), B.")
    kv_bytes_saved: OutSweep = Field(None, description="without − with sharing, B (negative when snapshots cost more "
                                      "than the hits save).")
    kv_bytes_saved_per_hit: OutSweep = Field(None, description="KV one hit does not hold, B.")
    tp: int | None = Field(None, description="Ranks the cache is split over (with tp).")
    prefix_kv_bytes_per_device: OutSweep = Field(None, description="Prefix KV on one rank, B (with tp).")
    state_bytes_per_device: float | None = Field(None, description="Recurrent state on one rank, B (with tp).")
    state_snapshot_bytes_per_device: OutSweep = Field(None, description="State snapshots on one rank, B "
                                                       "(with tp).")
    cache_entry_bytes_per_device: OutSweep = Field(None, description="Cache entry on one rank, B (with tp).")
    prefill_flops_linear_per_hit: OutSweep = Field(None, description="Linear-layer prefill FLOPs of the reusable "
                                                    "prefix, 2·params·tokens, FLOP.")
    prefill_flops_attention_per_hit: OutSweep = Field(None, description="Attention FLOPs over the prefix's causal "
                                                       "pairs, FLOP (0 when not modelled).")
    prefill_flops_per_hit: OutSweep = Field(None, description="Prefill FLOPs one hit skips, linear + attention, FLOP.")
    prefill_flops_skipped: OutSweep = Field(None, description="Expected prefill FLOPs skipped over all hits, FLOP.")
    ttft_saved_per_hit_s: OutSweep = Field(None, description="Time to first token one hit saves, s (with a prefill "
                                            "rate).")
    expected_ttft_saved_s: OutSweep = Field(None, description="TTFT a later request saves on average, prefix_hit_rate × "
                                             "saved per hit, s.")
    cost_uncached_usd: OutSweep = Field(None, description="Input cost of all requests without caching, USD.")
    cost_first_request_usd: OutSweep = Field(None, description="Input cost of the request that writes the cache, USD.")
    cost_later_request_usd: OutSweep = Field(None, description="Expected input cost of each later request, USD.")
    cost_cached_usd: OutSweep = Field(None, description="Input cost of all requests with caching, USD.")
    cost_saved_usd: OutSweep = Field(None, description="uncached − cached input cost, USD.")


def compute(req: PrefixCacheRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    groups, fmt, rec = kv_source(req, lookup, res, required=False)
    if groups is None and req.params is None and req.prefill_flops_per_token is None \
            and req.price_per_million_tokens_usd is None and req.state_checkpoint_interval_tokens is None:
        raise CalcInputError("model", "give a KV source (`model`, `model_config`, `architecture`, `kv_bytes_per_token`), prefill FLOPs "
                             "(`params`, `prefill_flops_per_token`) or `price_per_million_tokens_usd`")
    rate_fields = [k for k in ("prefill_tokens_per_s", "peak_flop_per_s", "hardware") if getattr(req, k) is not None]
    if len(rate_fields) > 1:
        raise CalcInputError(rate_fields[1], "give one prefill rate: `prefill_tokens_per_s`, `peak_flop_per_s` or `hardware`")
    named = {"prefix_tokens": req.prefix_tokens, "requests": req.requests, "prefix_hit_rate": req.prefix_hit_rate}
    for k in ("state_checkpoint_interval_tokens", "prefill_tokens_per_s", "peak_flop_per_s"):
        if getattr(req, k) is not None:
            named[k] = getattr(req, k)
    x = broadcast(named)
    prefix = x["prefix_tokens"].astype(np.int64)
    R = x["requests"]
    h = x["prefix_hit_rate"]
    tp = req.tp or 1
    outputs: dict = {}

    # ---- how much of the prefix can be reused
    reusable = prefix
    if req.block_size_tokens:
        reusable = (prefix // req.block_size_tokens) * req.block_size_tokens
    interval = x.get("state_checkpoint_interval_tokens")
    if interval is not None:
        iv = interval.astype(np.int64)
        checkpoints = prefix // iv
        reusable = np.minimum(reusable, checkpoints * iv)
        outputs["state_checkpoints"] = intify(checkpoints)
        res.step("state checkpoints", "checkpoints = floor(prefix / interval) (position 0 is the empty state)",
                 f"floor({num(first(prefix))} / {num(first(iv))})", checkpoints, "snapshots")
    p0 = int(first(prefix))
    res.step("reusable prefix", "restore point = last block / checkpoint boundary ≤ prefix",
             f"{num(p0)} tokens → {num(first(reusable))}", reusable, "tokens")
    recompute = prefix - reusable
    outputs.update({"prefix_tokens": intify(prefix), "restore_point_tokens": intify(reusable), "recompute_tokens": intify(recompute)})

    hits = h * np.maximum(R - 1, 0)
    res.step("expected hits", "hits = prefix_hit_rate × (requests − 1)", f"{num(first(h))} × ({num(first(R))} − 1)", hits, "requests")
    outputs["expected_hits"] = out(hits)

    # ---- KV bytes
    if groups is not None:
        sfmt = resolve_format(req.state_format, "state_format", "fp32")
        sz = kv_sizes(groups, fmt, sfmt, prefix, tp)
        history = sz.bytes_per_request - sz.state_bytes
        dev_history = sz.device_bytes_per_request - sz.device_state_bytes
        n_snap = (checkpoints if interval is not None else np.where(prefix >= 0, 1.0, 0.0)) if sz.state_elements else prefix * 0
        snap_bytes = n_snap * sz.state_bytes
        res.step("prefix KV (one copy)", "Σ layers × bytes/entry × entries at the prefix length",
                 f"{num(p0)} tokens" + (f" × {num(sz.bytes_per_token)} B/token" if sz.bytes_per_token else ""), history, "B")
        if sz.state_elements:
            res.step("state snapshots", "snapshots × recurrent state bytes", f"{num(first(n_snap))} × {fmt_bytes(sz.state_bytes)}",
                     snap_bytes, "B")
        without = R * history
        stored = history * (1 + (1 - h) * np.maximum(R - 1, 0)) + snap_bytes
        saved = without - stored
        res.step("KV without sharing", "requests × prefix KV", f"{num(first(R))} × {fmt_bytes(first(history))}", without, "B")
        res.step("KV with sharing", "prefix KV × [1 + (1 − prefix_hit_rate)(requests − 1)] + snapshots",
                 f"{fmt_bytes(first(history))} × [1 + {num(1 - first(h))} × {num(max(first(R) - 1, 0))}] + {fmt_bytes(first(snap_bytes))}",
                 stored, "B")
        res.step("KV saved", "without − with", f"{fmt_bytes(first(without))} − {fmt_bytes(first(stored))}", saved, "B")
        outputs.update({
            "kv_bytes_per_token": intify(sz.bytes_per_token),
            "prefix_kv_bytes": intify(history),
            "state_bytes": intify(sz.state_bytes),
            "state_snapshot_bytes": intify(snap_bytes),
            "cache_entry_bytes": intify(history + snap_bytes),
            "kv_bytes_without_sharing": intify(without),
            "kv_bytes_with_sharing": intify(stored),
            "kv_bytes_saved": intify(saved),
            "kv_bytes_saved_per_hit": intify(history),
        })
        if req.tp is not None:
            dev_snap = n_snap * sz.device_state_bytes
            outputs.update({"tp": tp, "prefix_kv_bytes_per_device": intify(dev_history),
                            "state_bytes_per_device": intify(sz.device_state_bytes),
                            "state_snapshot_bytes_per_device": intify(dev_snap),
                            "cache_entry_bytes_per_device": intify(dev_history + dev_snap)})
            if sz.state_elements:
                res.step("snapshots per device", "snapshots × state bytes per rank",
                         f"{num(first(n_snap))} × {fmt_bytes(sz.device_state_bytes)}", dev_snap, "B")

    # ---- prefill FLOPs skipped
    linear = None
    if req.prefill_flops_per_token is not None:
        linear = req.prefill_flops_per_token * reusable.astype(float)
        lin_txt = f"{num(req.prefill_flops_per_token)} FLOP/token × {num(first(reusable))}"
    else:
        params = req.params
        if params is None and rec is not None:
            counted = matrix_params(rec, res, include_lm_head=False, loc="model" if req.model is not None else "model_config",
                                    required=False)
            if counted is not None:
                params = res.step("N (matrix parameters per token)", counted.basis,
                                  " + ".join(num(v) for v in (counted.components or {}).values() if v) or num(counted.total),
                                  counted.total, "params")
        if params:
            linear = 2.0 * params * reusable.astype(float)
            lin_txt = f"2 × {num(params)} × {num(first(reusable))}"
    attn_terms = _attention_terms(req, rec, groups, res)
    per_hit = None
    if linear is not None:
        res.step("prefill FLOPs of the reused prefix (linear)", "2 · params · tokens", lin_txt, linear, "FLOP")
        attention = sum((c * causal_pairs(reusable, 0.0, w) for c, w in attn_terms), reusable * 0.0) if attn_terms else reusable * 0.0
        if attn_terms:
            res.step("prefill FLOPs (attention)", "Σ layers × 4·heads·head_dim × causal pairs (window-limited)",
                     f"pairs = {num(first(reusable))}·({num(first(reusable))}+1)/2 on full layers", attention, "FLOP")
        per_hit = linear + attention
        skipped = hits * per_hit
        res.step("expected prefill skipped", "hits × FLOPs per reused prefix", f"{num(first(hits))} × {fmt_flops(first(per_hit))}",
                 skipped, "FLOP")
        outputs.update({"prefill_flops_linear_per_hit": out(linear), "prefill_flops_attention_per_hit": out(attention),
                        "prefill_flops_per_hit": out(per_hit), "prefill_flops_skipped": out(skipped)})
        res.assume("Prefill FLOPs = 2 × parameters × tokens (multiply-add = 2 FLOPs; for MoE the active parameters) "
                   + ("plus attention over causal pairs (QK and AV, 4·heads·head_dim per pair per layer)."
                      if attn_terms else "; the attention term is not modelled for this input (give `attention_flops_per_pair`)."))

    # ---- TTFT
    if "prefill_tokens_per_s" in x:
        per_hit_s = reusable / x["prefill_tokens_per_s"]
        res.step("TTFT saved per hit", "reused tokens / prefill rate", f"{num(first(reusable))} / {num(first(x['prefill_tokens_per_s']))} tok/s",
                 per_hit_s, "s")
    elif "peak_flop_per_s" in x or req.hardware is not None:
        field = "peak_flop_per_s" if req.hardware is None else "hardware"
        if per_hit is None:
            raise CalcInputError(field, "a FLOP/s rate needs `params`, `prefill_flops_per_token` or a model with a parameter count")
        peak, _, _ = hardware_rates(req, lookup, res, need_bw=False)
        peak = x["peak_flop_per_s"] if "peak_flop_per_s" in x else peak
        rate = res.step("prefill rate", "peak per device × tp × compute_efficiency",
                        f"{num(first(peak))} FLOP/s × {tp} × {num(req.compute_efficiency)}",
                        peak * tp * req.compute_efficiency, "FLOP/s")
        if req.compute_efficiency == 1.0:
            res.assume("Prefill at the peak rate (compute_efficiency 1): the TTFT saved is a lower bound; give "
                       "compute_efficiency (the fraction of peak a prefill reaches, often 0.4–0.6).")
        per_hit_s = per_hit / rate
        res.step("TTFT saved per hit", "prefill FLOPs per hit / prefill rate",
                 f"{fmt_flops(first(per_hit))} / {num(first(rate))} FLOP/s", per_hit_s, "s")
    else:
        per_hit_s = None
    if per_hit_s is not None:
        outputs.update({"ttft_saved_per_hit_s": out(per_hit_s), "expected_ttft_saved_s": out(h * per_hit_s)})
        res.step("expected TTFT saved (a later request)", "prefix_hit_rate × saved per hit", f"{num(first(h))} × {fmt_s(first(per_hit_s))}",
                 h * per_hit_s, "s")

    # ---- input billing
    if req.price_per_million_tokens_usd is not None:
        p = req.price_per_million_tokens_usd
        write = p.cache_write if p.cache_write is not None else p.input
        read = p.cache_read if p.cache_read is not None else p.input
        P = prefix.astype(float)
        new = float(req.new_input_tokens)
        uncached = R * (P + new) * p.input / 1e6
        first_cost = (P * write + new * p.input) / 1e6
        later = (h * P * read + (1 - h) * P * write + new * p.input) / 1e6
        cached = first_cost + np.maximum(R - 1, 0) * later
        res.step("input cost without caching", "requests × (prefix + new) × input price",
                 f"{num(first(R))} × ({num(p0)} + {num(new)}) × ${num(p.input)}/M", uncached, "USD")
        res.step("first request (cache write)", "prefix × write price + new × input price",
                 f"{num(p0)} × ${num(write)}/M + {num(new)} × ${num(p.input)}/M", first_cost, "USD")
        res.step("later request (expected)", "h·prefix × read + (1−h)·prefix × write + new × input",
                 f"{num(first(h))}×{num(p0)}×${num(read)}/M + {num(1 - first(h))}×{num(p0)}×${num(write)}/M + {num(new)}×${num(p.input)}/M",
                 later, "USD")
        res.step("input cost with caching", "first + (requests − 1) × later", f"{num(first(first_cost))} + {num(max(first(R) - 1, 0))} × {num(first(later))}",
                 cached, "USD")
        outputs.update({"cost_uncached_usd": out(uncached), "cost_first_request_usd": out(first_cost),
                        "cost_later_request_usd": out(later), "cost_cached_usd": out(cached),
                        "cost_saved_usd": out(uncached - cached)})
        res.assume("Billing: the first request writes the prefix at the cache-write price (it replaces, not adds to, the "
                   "input price); a later hit reads it at the cache-read price; a later miss writes it again. "
                   "Output tokens are not priced.")

    res.outputs = outputs
    res.assume(
        "The first request computes the prefix and its KV becomes the cache entry; each later request hits with "
        "probability prefix_hit_rate (expected values). A miss recomputes the prefix and holds its own copy.",
        "KV saved compares with every request holding its own copy of the prefix at the same time; KV of the tokens "
        "after the prefix is per request either way and not counted.",
        "Recurrent state: a hybrid model can only resume from a saved snapshot, so reuse stops at the last checkpoint "
        "at or below the prefix; without an interval one snapshot at the prefix end is assumed.",
    )
    res.headline = _headline(req, outputs, rec)
    return res


def _headline(req: PrefixCacheRequest, o: dict, rec: dict | None) -> str:
    """What a shared prefix saves in memory, TTFT and money (a sweep: its first point)."""
    n = hf.n_points(req.prefix_tokens, req.requests, req.prefix_hit_rate, req.state_checkpoint_interval_tokens,
                    req.prefill_tokens_per_s, req.peak_flop_per_s)
    text = (f"Sharing a {hf.fmt_count(req.prefix_tokens)}-token prefix"
            + (f" of {hf.name_of(rec)}" if rec is not None else "")
            + f" across {hf.plural(req.requests, 'request')} at a {hf.fmt_pct(req.prefix_hit_rate)} hit rate")
    parts = []
    if o.get("kv_bytes_saved") is not None:
        parts.append(f"{hf.fmt_bytes(o['kv_bytes_saved'])} of KV cache ({hf.fmt_bytes(o.get('kv_bytes_with_sharing'))} "
                     f"instead of {hf.fmt_bytes(o.get('kv_bytes_without_sharing'))})")
    if o.get("ttft_saved_per_hit_s") is not None:
        parts.append(f"{hf.fmt_seconds(o['ttft_saved_per_hit_s'])} of prefill per hit")
    elif o.get("prefill_flops_skipped") is not None:
        parts.append(f"{hf.fmt_flops(o['prefill_flops_skipped'])} of prefill")
    if parts:
        text += " saves " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])
    else:
        text += f" reuses {hf.fmt_count(o.get('restore_point_tokens'))} tokens per hit"
    if o.get("cost_cached_usd") is not None:
        text += f"; input costs {hf.fmt_usd(o['cost_cached_usd'])} instead of {hf.fmt_usd(o.get('cost_uncached_usd'))}"
    if (hf.scalar(o.get("recompute_tokens")) or 0) > 0:
        text += f" ({hf.fmt_count(o['recompute_tokens'])} tokens after the last state snapshot are recomputed)"
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="prefix-cache",
        profile=Profile(7.2e-07, 698, 232),
        family="prefix_cache",
        title="Prefix cache savings",
        summary="What sharing a common prefix saves: KV bytes stored once instead of per request, prefill FLOPs and "
                "TTFT skipped, and input cost, as expected values over the hit rate — including recurrent-state "
                "snapshots of hybrid models.",
        description="KV of the prefix comes from the kv-cache engine (model, architecture or bytes/token). Expected "
                    "hits = prefix_hit_rate × (requests − 1); KV saved = hits × prefix KV − state snapshots; prefill "
                    "skipped = hits × (2·params·tokens + attention pairs × 4·heads·head_dim per layer), params being the "
                    "matrices a token multiplies (the same count training-compute uses, without the LM head); TTFT "
                    "saved per hit = tokens / (tokens/s) or FLOPs / (peak FLOP/s of `peak_flop_per_s` or a hardware id "
                    "× tp × compute_efficiency). With a checkpoint interval, reuse stops at the last snapshot ≤ prefix. "
                    "Optional prices compare cached and uncached input billing.",
        request_model=PrefixCacheRequest,
        compute=compute,
        outputs_model=PrefixCacheOutputs,
        example={"model": "llama-3.1-70b", "kv_format": "fp16", "prefix_tokens": 2000, "requests": 100, "prefix_hit_rate": 0.9,
                 "prefill_tokens_per_s": 5000},
        cases=("hybrid-prefix-state", "cache-tiers-and-routing", "cache-events-and-routing", "platform-routing"),
        sweepable=("prefix_tokens", "requests", "prefix_hit_rate", "state_checkpoint_interval_tokens", "prefill_tokens_per_s",
                   "peak_flop_per_s"),
        chart=Chart(x="prefix_hit_rate", y=("kv_bytes_saved",), x_label="hit rate", y_label="KV bytes saved"),
        extra_examples=(
            {"model": "kimi-k3", "prefix_tokens": 8192, "state_checkpoint_interval_tokens": [4096, 1024, 256], "tp": 8},
            {"prefix_tokens": 8000, "requests": 10, "new_input_tokens": 2000,
             "price_per_million_tokens_usd": {"input": 2, "cache_write": 2.5, "cache_read": 0.2}},
            {"model": "llama-3.1-8b", "prefix_tokens": 4000, "requests": 8, "prefix_hit_rate": 0.75, "hardware": "h100-sxm",
             "compute_efficiency": 0.5},
        ),
    ),
]
