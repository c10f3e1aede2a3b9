"""KV eviction budgets: attention sinks + recent window + heavy hitters instead of the full history.

StreamingLLM keeps a few initial "sink" tokens and a recent window; H2O keeps a recent window plus the
"heavy hitters" with the largest accumulated attention; Scissorhands keeps the tokens attended to
recently. As a memory budget they are all

    kept(N) = min(N, sinks + recent + heavy)       recent, heavy = a count and/or a fraction of N

per full-history layer. The calculator sizes the budget with the kv-cache engine; which tokens are kept
(and what that does to quality) is the policy's business, not this arithmetic.
"""
from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, FractionSweep, LIST_SEP, Lookup, NonNegFloat,
    NonNegFloatSweep, NonNegIntSweep, num, out, Outputs, OutSweep, Profile, request_inputs, Result,
)
from calculators.domain import (
    Architecture, FormatField, intify, kv_sizes, kv_source, MODEL_CONFIG_FIELD, resolve_format, weights_in_budget,
)
from calculators.framework import headline as hf


class KVEvictionRequest(CalcRequest):
    """A context of `tokens` tokens cached under an eviction budget."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id.", examples=["llama-3.1-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    architecture: Architecture | None = Field(None, description="Explicit layer groups (kv-cache form) instead of `model` / `model_config`.")
    kv_bytes_per_token: NonNegFloat | None = Field(None, description="KV bytes per token of full history, instead of a model.")
    kv_format: FormatField = Field("bf16", description="Cache format (as in kv-cache).")
    state_format: FormatField = Field("fp32", description="Recurrent state format (as in kv-cache).")
    tp: Annotated[int, Field(ge=1, le=4096)] | None = Field(None, description="Tensor-parallel ranks: adds per-device bytes.")
    tokens: NonNegIntSweep = Field(description="Context length (tokens seen so far). Sweepable.", examples=[32768])
    sink_tokens: NonNegIntSweep = Field(4, description="Initial tokens always kept (attention sinks). Sweepable.", examples=[4])
    recent_tokens: NonNegIntSweep = Field(0, description="Most recent tokens kept (sliding window). Sweepable.", examples=[2048])
    recent_fraction: FractionSweep = Field(0.0, description="Recent window as a fraction of the context (adds to recent_tokens). Sweepable.")
    heavy_hitter_tokens: NonNegIntSweep = Field(0, description="Heavy-hitter tokens kept (highest accumulated attention). Sweepable.",
                                                examples=[2048])
    heavy_hitter_fraction: FractionSweep = Field(0.0, description="Heavy hitters as a fraction of the context (adds to the count). Sweepable.",
                                                 examples=[0.1])
    requests: NonNegIntSweep = Field(1, description="Concurrent requests. Sweepable.")
    memory_budget_bytes: NonNegFloatSweep | None = Field(
        None, description="Memory across the tensor-parallel group for the weights and the KV cache, bytes: compares max "
        "requests with and without eviction. With a model (or `weight_bytes`) the weights are taken out first; with "
        "`subtract_weights: false` all of it is KV. Sweepable.")
    weight_bytes: NonNegFloat | None = Field(None, description="Weights resident across the group, bytes (default with a "
                                             "model: its parameters in `weight_format`).")
    weight_format: FormatField | None = Field(None, description="Format of the weights (default: the model's published "
                                              "weight dtype).")
    subtract_weights: bool | None = Field(None, description="Whether `memory_budget_bytes` still holds the weights. "
                                          "Default: yes when they are known (a model, or `weight_bytes`); false for a "
                                          "budget that is already KV only.")


#: a number, or one per point when an input is swept (null where not finite)
#: a whole count of tokens or entries, or one per point
EvictCount = int | list[int]
#: a whole count of requests, or one per point; null where a request takes no bytes (any number fits)
EvictRequests = int | None | list[int | None]


class KVEvictionOutputs(Outputs):
    """Outputs of kv-eviction; lists where an input is swept. Entries are per full-history layer, bytes in B."""

    budget_tokens: EvictCount = Field(description="Tokens the policy may keep: sinks + recent + heavy hitters before "
                                      "capping at the context, tokens.")
    entries_kept: EvictCount = Field(description="Entries kept per full-history layer, min(context, budget).")
    entries_evicted: EvictCount = Field(description="Entries dropped per full-history layer, context − kept.")
    kept_sinks: EvictCount = Field(description="Attention-sink entries kept (the first tokens).")
    kept_recent: EvictCount = Field(description="Recent-window entries kept.")
    kept_heavy_hitters: EvictCount = Field(description="Heavy-hitter entries kept (chosen among the other tokens).")
    fraction_kept: OutSweep = Field(description="kept / context, a fraction (1 for an empty context).")
    bytes_per_token: float | None = Field(description="KV bytes per token of the full-history streams, B/token.")
    bytes_full_per_request: OutSweep = Field(description="KV of one request without eviction (kv-cache bytes), B.")
    bytes_kept_per_request: OutSweep = Field(description="KV of one request under the budget, B.")
    bytes_saved_per_request: OutSweep = Field(description="full − kept per request, B.")
    bytes_full_total: OutSweep = Field(description="Full KV of all `requests`, B.")
    bytes_kept_total: OutSweep = Field(description="Kept KV of all `requests`, B.")
    bytes_saved_total: OutSweep = Field(description="Bytes saved over all `requests`, B.")
    compression_ratio: OutSweep = Field(description="full / kept bytes per request (null when nothing is kept).")
    tp: int | None = Field(None, description="Ranks the cache is split over (with tp).")
    per_device_bytes_full_per_request: OutSweep = Field(None, description="Full KV of one request on one rank, B "
                                                        "(with tp).")
    per_device_bytes_kept_per_request: OutSweep = Field(None, description="Kept KV of one request on one rank, B "
                                                        "(with tp).")
    max_requests_full: EvictRequests = Field(None, description="Requests the memory budget holds without eviction, "
                                             "floor(budget / full bytes) (with memory_budget_bytes).")
    max_requests_kept: EvictRequests = Field(None, description="Requests the memory budget holds under the eviction "
                                             "budget (with memory_budget_bytes).")


def compute(req: KVEvictionRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    groups, fmt, rec = kv_source(req, lookup, res, required=True)
    sfmt = resolve_format(req.state_format, "state_format", "fp32")
    named = {"tokens": req.tokens, "sink_tokens": req.sink_tokens, "recent_tokens": req.recent_tokens,
             "recent_fraction": req.recent_fraction, "heavy_hitter_tokens": req.heavy_hitter_tokens,
             "heavy_hitter_fraction": req.heavy_hitter_fraction, "requests": req.requests}
    if req.memory_budget_bytes is not None:
        named["memory_budget_bytes"] = req.memory_budget_bytes
    x = broadcast(named)
    n = x["tokens"].astype(np.int64)
    tp = req.tp or 1
    sinks = np.minimum(x["sink_tokens"].astype(np.int64), n)
    recent_budget = x["recent_tokens"].astype(np.int64) + np.floor(x["recent_fraction"] * n).astype(np.int64)
    heavy_budget = x["heavy_hitter_tokens"].astype(np.int64) + np.floor(x["heavy_hitter_fraction"] * n).astype(np.int64)
    recent = np.minimum(recent_budget, n - sinks)
    heavy = np.minimum(heavy_budget, n - sinks - recent)
    kept = sinks + recent + heavy
    budget_tokens = x["sink_tokens"].astype(np.int64) + recent_budget + heavy_budget
    n0 = int(first(n))
    res.step("budget", "B = sinks + (recent + ⌊recent_fraction·N⌋) + (heavy + ⌊heavy_fraction·N⌋)",
             f"{num(first(x['sink_tokens']))} + {num(first(recent_budget))} + {num(first(heavy_budget))}", budget_tokens, "tokens")
    res.step("entries kept", "kept = min(N, B) per full-history layer", f"min({num(n0)}{LIST_SEP}{num(first(budget_tokens))})", kept, "tokens")

    full = kv_sizes(groups, fmt, sfmt, n, tp)
    bpt = full.bytes_per_token
    dbpt = full.device_bytes_per_token
    if bpt == 0:
        res.assume("This model has no full-history streams: eviction of the kind sized here does not apply, nothing is saved.")
    evicted = (n - kept).astype(float)
    full_b = full.bytes_per_request
    kept_b = full_b - bpt * evicted
    saved = full_b - kept_b
    res.step("full KV per request", "kv-cache bytes at N tokens", f"{num(n0)} tokens × {num(bpt)} B/token (+ other streams, state)",
             full_b, "B")
    res.step("kept KV per request", "full − bytes/token × evicted entries", f"{fmt_bytes(first(full_b))} − {num(bpt)} × {num(first(evicted))}",
             kept_b, "B")
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(n > 0, kept / np.where(n > 0, n, 1), 1.0)
        ratio = np.where(kept_b > 0, full_b / np.where(kept_b > 0, kept_b, 1.0), np.nan)
    reqs = x["requests"]
    outputs = {
        "budget_tokens": intify(budget_tokens),
        "entries_kept": intify(kept), "entries_evicted": intify(evicted),
        "kept_sinks": intify(sinks), "kept_recent": intify(recent), "kept_heavy_hitters": intify(heavy),
        "fraction_kept": out(frac),
        "bytes_per_token": intify(bpt),
        "bytes_full_per_request": intify(full_b), "bytes_kept_per_request": intify(kept_b),
        "bytes_saved_per_request": intify(saved),
        "bytes_full_total": intify(full_b * reqs), "bytes_kept_total": intify(kept_b * reqs), "bytes_saved_total": intify(saved * reqs),
        "compression_ratio": out(ratio),
    }
    if req.tp is not None:
        dev_kept = full.device_bytes_per_request - dbpt * evicted
        outputs.update({"tp": tp, "per_device_bytes_full_per_request": intify(full.device_bytes_per_request),
                        "per_device_bytes_kept_per_request": intify(dev_kept)})
        group_full, group_kept = full.device_bytes_per_request * tp, dev_kept * tp
    else:
        group_full, group_kept = full_b, kept_b
    weights = None
    if "memory_budget_bytes" in x:
        mb = x["memory_budget_bytes"]
        weights = weights_in_budget(req, rec, res, tp)
        if weights is not None:
            total = mb
            mb = np.maximum(total - weights, 0.0)
            res.step("KV budget", "budget − weights", f"{fmt_bytes(first(total))} − {fmt_bytes(weights)}", total - weights, "B")
        with np.errstate(divide="ignore", invalid="ignore"):
            m_full = np.where(group_full > 0, np.floor(mb / np.where(group_full > 0, group_full, 1.0)), np.inf)
            m_kept = np.where(group_kept > 0, np.floor(mb / np.where(group_kept > 0, group_kept, 1.0)), np.inf)
        res.step("max requests", "floor(budget / bytes per request), full vs kept",
                 f"floor({num(first(mb))} / {num(first(group_full))}) vs floor({num(first(mb))} / {num(first(group_kept))})", m_kept, "requests")
        outputs.update({"max_requests_full": intify(m_full), "max_requests_kept": intify(m_kept)})
    else:
        for k in ("weight_bytes", "weight_format", "subtract_weights"):
            if getattr(req, k) is not None:
                raise CalcInputError(k, "only used with `memory_budget_bytes`")
    res.outputs = outputs
    res.assume(
        "The budget applies per full-history layer (every layer and head keeps the same number of entries); windowed "
        "and compressed streams and recurrent state keep their own size.",
        "Sinks, recent window and heavy hitters are disjoint sets (heavy hitters are chosen among the other tokens); "
        "fractions are of the current context and round down.",
        "Bytes only: the attention scores H2O accumulates, the policy's compute and any quality loss are not counted; "
        "H2O's reported quality at ~20 % of the cache is a property of its evaluated tasks, not of this arithmetic.",
        "An evicted token cannot be recovered: a later prefix-cache hit on it needs recompute.",
    )
    res.headline = _headline(req, outputs, rec, fmt, weights)
    return res


def _headline(req: KVEvictionRequest, o: dict, rec: dict | None, fmt, weights: float | None) -> str:
    """KV kept vs full per request, and what the budget then holds (a sweep: its first point)."""
    n = hf.n_points(req.tokens, req.sink_tokens, req.recent_tokens, req.recent_fraction, req.heavy_hitter_tokens,
                    req.heavy_hitter_fraction, req.requests, req.memory_budget_bytes)
    who = hf.name_of(rec, "The model") if rec is not None else "The model"
    kind = f"{fmt.name} KV cache" if getattr(fmt, "name", None) and fmt.name != "given" else "KV cache"
    text = (f"{who} at {hf.fmt_count(req.tokens)} tokens keeps {hf.fmt_count(o.get('entries_kept'))} entries per layer "
            f"({hf.fmt_pct(o.get('fraction_kept'))}): {hf.fmt_bytes(o.get('bytes_kept_per_request'))} of {kind} per request "
            f"instead of {hf.fmt_bytes(o.get('bytes_full_per_request'))}")
    if o.get("max_requests_kept") is not None:
        text += (f"; {hf.fmt_bytes(req.memory_budget_bytes)}{' after the weights' if weights is not None else ''} then holds {hf.plural(o['max_requests_kept'], 'request')} "
                 f"instead of {hf.fmt_count(o.get('max_requests_full'))}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="kv-eviction",
        profile=Profile(6.4e-07, 448, 158),
        family="kv_sizing",
        title="KV eviction budget",
        summary="Entries, fraction and bytes of KV kept under an attention-sink + recent-window + heavy-hitter budget "
                "(StreamingLLM / H2O / Scissorhands style) against the full history, per request and in total.",
        description="kept = min(N, sinks + recent + ⌊recent_fraction·N⌋ + heavy + ⌊heavy_fraction·N⌋) on each "
                    "full-history layer; bytes kept = full kv-cache bytes − bytes/token × evicted entries. Windowed, "
                    "compressed and recurrent parts are unchanged. A memory budget (minus the model's weights unless "
                    "`subtract_weights: false`) compares max requests with and without eviction.",
        request_model=KVEvictionRequest,
        compute=compute,
        outputs_model=KVEvictionOutputs,
        example={"model": "llama-3.1-8b", "tokens": [4096, 32768, 131072], "sink_tokens": 4, "recent_tokens": 2048,
                 "heavy_hitter_tokens": 2048},
        cases=("cache-and-reconfiguration", "hybrid-prefix-state", "kv-quantization-and-execution"),
        sweepable=("tokens", "sink_tokens", "recent_tokens", "recent_fraction", "heavy_hitter_tokens",
                   "heavy_hitter_fraction", "requests", "memory_budget_bytes"),
        chart=Chart(x="tokens", y=("bytes_full_per_request", "bytes_kept_per_request"), x_label="context tokens",
                    y_label="bytes per request"),
        families=("prefix_cache",),
        extra_examples=({"model": "qwen3-8b", "tokens": 32768, "sink_tokens": 0, "recent_fraction": 0.1,
                         "heavy_hitter_fraction": 0.1},),
    ),
]
