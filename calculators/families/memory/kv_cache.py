"""KV / attention-state size for any attention family (the DESIGN's `kv-cache` contract).

A model is a list of layer groups; each layer of a group keeps *streams* (a stream stores `dim`
values per retained entry) and optionally a fixed recurrent state of `state_elements` values.
Retained entries at N tokens: `min(N, window)` for a window stream, `floor(N / ratio)` for a
compressed stream (both set: `min(floor(N / ratio), window)`, i.e. the window counts entries).
GQA/MHA: `dim = 2·kv_heads·head_dim`; MLA: `dim = kv_lora_rank + rope_dim`; DeepSeek-V4 CSA/HCA:
several streams with a `ratio`; KDA/SSM: `state_elements`.

The engine (`resolve_groups`, `kv_sizes`) lives in `calculators.domain.architecture`, shared with every
calculator that sizes KV, so that they all size it exactly as this one does.
"""
from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, Fraction, Lookup, NonNegFloat,
    NonNegFloatSweep, NonNegIntSweep, num, out, Outputs, OutSweep, Profile, request_inputs, Result,
)
from calculators.domain import (
    Architecture, explain_memory_rule, Fmt, FORMAT_HELP, FormatField, group_lines, GroupSpec, hardware_spec, intify,
    kv_sizes, MODEL_CONFIG_FIELD, note_scope, output_label, resolve_format, resolve_groups, weights_in_budget,
)
from calculators.framework import headline as H


class KVCacheRequest(CalcRequest):
    """KV / state bytes of `requests` requests of `tokens` tokens each."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id (its layer groups come from the store).", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    architecture: Architecture | None = Field(None, description="Explicit layer groups instead of `model`.")
    kv_format: FormatField = Field("bf16", description="Cache format. " + FORMAT_HELP,
                                   examples=["bf16"])
    state_format: FormatField = Field("fp32", description="Format of recurrent state (KDA/SSM).", examples=["fp32"])
    tokens: NonNegIntSweep = Field(description="Tokens in each request's history (prompt + generated). Sweepable.", examples=[8192])
    requests: NonNegIntSweep = Field(1, description="Concurrent requests. Sweepable.", examples=[1])
    tp: Annotated[int, Field(ge=1, le=4096)] | None = Field(
        None, description="Tensor-parallel ranks sharing the layers: gives per-device bytes.", examples=[8])
    page_size_tokens: Annotated[int, Field(ge=1, le=10**9)] | None = Field(
        None, description="Paged allocation: each stream's retained entries round up to whole pages of this many entries.", examples=[16])
    memory_budget_bytes: NonNegFloatSweep | None = Field(
        None, description="Memory across the tensor-parallel group (per device × ranks) for the weights and the KV cache, "
        "bytes: with a model (or `weight_bytes`) the weights are taken out first and the rest holds KV; with "
        "`subtract_weights: false` all of it is KV. Sweepable.", examples=[40 * 2**30])
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: budget = device memory × ranks × utilization − weights.",
                                 examples=["h100-sxm"])
    weight_bytes: NonNegFloat | None = Field(None, description="Weights resident across the group, bytes (default with a "
                                             "model: its parameters in `weight_format`).")
    weight_format: FormatField | None = Field(None, description="Format of the weights (default: the model's published weight dtype).")
    subtract_weights: bool | None = Field(None, description="Whether the budget (`memory_budget_bytes` or the hardware's "
                                          "memory) still holds the weights. Default: yes when they are known (a model, "
                                          "or `weight_bytes`); false for a budget that is already KV only.")
    memory_utilization: Fraction | None = Field(None, description="Fraction of device memory the engine may use (default 0.9, "
                                                "vLLM's gpu_memory_utilization).")
    runtime_reserve_bytes: NonNegFloat | None = Field(None, description="Bytes reserved per device on top of that (default 0).")


# --------------------------------------------------------------------------- outputs



class StreamOut(Outputs):
    name: str | None
    dim: int = Field(description="Values per retained entry.")
    window: int | None = Field(description="Sliding window in entries (null: full history).")
    ratio: int = Field(description="One entry per `ratio` tokens.")
    entries: OutSweep = Field(description="Retained entries per layer at `tokens`.")
    bytes: OutSweep = Field(description="Bytes of this stream over the group's layers per request, B.")


class GroupOut(Outputs):
    name: str | None
    count: int = Field(description="Layers in the group.")
    state_elements: float | None = Field(description="Recurrent state values per request in the group.")
    state_bytes: float | None = Field(description="Recurrent state bytes per request in the group, B.")
    bytes_per_request: OutSweep = Field(description="History + state bytes of the group per request, B.")
    per_device_bytes_per_request: OutSweep = Field(None, description="The same on one tensor-parallel rank, B.")
    streams: list[StreamOut]


class KVCacheOutputs(Outputs):
    """Outputs of kv-cache. Bytes are plain byte counts (B); lists where `tokens`, `requests` or the budget is swept."""

    values_per_token: OutSweep = Field(description="Cached values per token of full-history streams.")
    bytes_per_token: OutSweep = Field(description="Bytes per token of full-history streams, B/token.")
    values_per_request: OutSweep = Field(description="Cached values per request (history + state).")
    bytes_per_request: OutSweep = Field(description="Bytes per request (history + state), B.")
    bytes_total: OutSweep = Field(description="bytes_per_request × requests, B.")
    state_elements: OutSweep = Field(description="Recurrent state values per request.")
    state_bytes: OutSweep = Field(description="Recurrent state bytes per request, B.")
    kv_format: str = Field(description="Cache format label.")
    bytes_per_value: float | None = Field(description="Effective bytes per cached value (scales included), B.")
    pages_per_request: OutSweep = Field(None, description="Pages per request (with page_size_tokens).")
    page_bytes: OutSweep = Field(None, description="Bytes of one page of all full-history layers, B.")
    tp: int | None = Field(None, description="Ranks (with tp).")
    per_device_bytes_per_token: OutSweep = Field(None, description="Bytes per token on one rank, B/token.")
    per_device_bytes_per_request: OutSweep = Field(None, description="Bytes per request on one rank, B.")
    per_device_bytes: OutSweep = Field(None, description="All requests on one rank, B.")
    bytes_all_devices: OutSweep = Field(None, description="per_device_bytes × ranks (replicas counted), B.")
    replication_factor: OutSweep = Field(None, description="bytes_all_devices / bytes_total (1 = no replication).")
    memory_budget_bytes: OutSweep = Field(None, description="KV budget across the ranks, B: the memory given (or the "
                                          "hardware's usable memory) minus the weights when they are subtracted.")
    requests_fit: OutSweep = Field(None, description="budget / bytes per request (fractional; null when a request takes no bytes).")
    max_requests: OutSweep = Field(None, description="floor(requests_fit).")
    fits: bool | list[bool] | None = Field(None, description="All `requests` fit within the budget.")
    groups: list[GroupOut]


# --------------------------------------------------------------------------- calculator

def compute(req: KVCacheRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    groups, rec = resolve_groups(req, lookup, res)
    fmt = resolve_format(req.kv_format, "kv_format")
    sfmt = resolve_format(req.state_format, "state_format", "fp32")
    tp = req.tp or 1
    named = {"tokens": req.tokens, "requests": req.requests}
    if req.memory_budget_bytes is not None:
        if req.hardware is not None:
            raise CalcInputError("memory_budget_bytes", "give either `memory_budget_bytes` or `hardware`, not both")
        named["memory_budget_bytes"] = req.memory_budget_bytes
    x = broadcast(named)
    tokens = x["tokens"].astype(np.int64)
    requests = x["requests"]
    sz = kv_sizes(groups, fmt, sfmt, tokens, tp, req.page_size_tokens)
    n0 = int(first(tokens))

    res.step("format", "bytes/value = (bits × group/8 + scale bytes) / group", fmt.describe(),
             fmt.effective_bits / 8, "B/value")
    if sz.values_per_token:
        res.step("bytes per token (full-history streams)", "Σ layers × dim × bytes/value",
                 " + ".join(f"{g.count}×{s.dim}×{num(fmt.effective_bits / 8)}" for g in groups for s in g.streams if s.full),
                 sz.bytes_per_token, "B/token")
    kv_part = sz.bytes_per_request - sz.state_bytes
    res.step("history per request", "Σ layers × bytes/entry × retained entries (window: min(N, W); ratio: floor(N/r)"
             + ("; rounded up to whole pages" if req.page_size_tokens else "") + ")",
             " + ".join(group_lines(groups, fmt, n0)[:12]) or "no streams", kv_part, "B")
    if sz.state_elements:
        res.step("recurrent state per request", "Σ layers × state elements × state bytes/value",
                 " + ".join(f"{g.count}×{num(g.state_elements)}×{num((g.state_fmt or sfmt).effective_bits / 8)}"
                            for g in groups if g.state_elements), sz.state_bytes, "B")
    res.step("bytes per request", "history + state", f"{fmt_bytes(first(kv_part))} + {fmt_bytes(sz.state_bytes)}",
             sz.bytes_per_request, "B")
    bytes_total = sz.bytes_per_request * requests
    res.step("all requests", "bytes_total = bytes_per_request × requests",
             f"{fmt_bytes(first(sz.bytes_per_request))} × {num(first(requests))}", bytes_total, "B")

    outputs = {
        "values_per_token": intify(sz.values_per_token),
        "bytes_per_token": intify(sz.bytes_per_token),
        "values_per_request": intify(sz.values_per_request),
        "bytes_per_request": intify(sz.bytes_per_request),
        "bytes_total": intify(bytes_total),
        "state_elements": intify(sz.state_elements),
        "state_bytes": intify(sz.state_bytes),
        "kv_format": output_label(req.kv_format, fmt),
        "bytes_per_value": fmt.effective_bits / 8,
    }
    if req.page_size_tokens:
        outputs["pages_per_request"] = intify(sz.pages_per_request)
        outputs["page_bytes"] = intify(sz.bytes_per_token * req.page_size_tokens)
        res.step("pages", "pages = ceil(entries / page size) per stream; a page of all full-history layers holds page × bytes/token",
                 f"ceil({num(n0)} / {req.page_size_tokens}); {req.page_size_tokens} × {num(sz.bytes_per_token)} B",
                 sz.pages_per_request, "pages")

    per_req_group = sz.bytes_per_request
    if req.tp is not None:
        dev_total = sz.device_bytes_per_request * requests
        res.step("per device", "KV heads split across ranks (ceil(h / TP) heads each, replicated when h < TP); latent "
                 "streams replicated; state split by state heads where known",
                 f"{fmt_bytes(first(sz.device_bytes_per_request))} per request on each of {tp} ranks",
                 dev_total, "B")
        outputs.update({
            "tp": tp,
            "per_device_bytes_per_token": intify(sz.device_bytes_per_token),
            "per_device_bytes_per_request": intify(sz.device_bytes_per_request),
            "per_device_bytes": intify(dev_total),
            "bytes_all_devices": intify(dev_total * tp),
            "replication_factor": out(np.where(sz.bytes_per_request > 0, sz.device_bytes_per_request * tp
                                               / np.where(sz.bytes_per_request > 0, sz.bytes_per_request, 1.0), 1.0)),
        })
        per_req_group = sz.device_bytes_per_request * tp

    budget = weights = None
    if req.hardware is not None:
        budget = _device_memory(req, lookup, res, tp)
    elif "memory_budget_bytes" in x:
        budget = x["memory_budget_bytes"]
    else:
        for k in ("weight_bytes", "weight_format", "subtract_weights"):
            if getattr(req, k) is not None:
                raise CalcInputError(k, "only used with `memory_budget_bytes` or `hardware`")
    if budget is not None:
        weights = weights_in_budget(req, rec, res, tp, needed=req.hardware is not None)
        if weights is not None:
            total = budget
            budget = total - weights
            res.step("KV budget", "budget − weights", f"{fmt_bytes(first(total))} − {fmt_bytes(weights)}", budget, "B")
            if np.any(budget < 0):
                res.assume("The weights alone exceed the memory" + (" at some points" if np.ndim(budget) else "")
                           + ": no request fits there.")
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.where(per_req_group > 0, np.maximum(budget, 0.0) / np.where(per_req_group > 0, per_req_group, 1.0), np.inf)
        maxr = np.floor(fit)
        res.step("max requests", "floor(KV budget / (bytes per request on all ranks))" if req.tp else
                 "floor(KV budget / bytes_per_request)", f"floor({num(first(budget))} B / {num(first(per_req_group))} B)", maxr, "requests")
        outputs.update({"memory_budget_bytes": intify(budget), "requests_fit": out(fit), "max_requests": intify(maxr),
                        "fits": out(per_req_group * requests <= budget)})

    outputs["groups"] = [{
        "name": g["name"], "count": g["count"], "state_elements": g["state_elements"], "state_bytes": intify(g["state_bytes"]),
        "bytes_per_request": intify(g["bytes_per_request"]),
        **({"per_device_bytes_per_request": intify(g["per_device_bytes_per_request"])} if req.tp else {}),
        "streams": [{"name": s["name"], "dim": s["dim"], "window": s["window"], "ratio": s["ratio"],
                     "entries": intify(s["entries"]), "bytes": intify(s["bytes"])} for s in g["streams"]],
    } for g in sz.groups]
    res.outputs = outputs
    res.headline = _headline(req, rec, outputs, weights)
    _assumptions(res, fmt, groups, req)
    return res


def _headline(req: KVCacheRequest, rec: dict | None, o: dict, weights: float | None) -> str:
    name = (rec.label or "This model") if rec else "This architecture"
    what = "KV cache and recurrent state" if H.scalar(o["state_bytes"]) else "KV cache"
    s = (f"{name} at {H.fmt_count(req.tokens)} tokens in {str(o['kv_format']).upper()} needs "
         f"{H.fmt_bytes(o['bytes_per_request'])} of {what} per request")
    if req.tp is not None:
        s += f", {H.fmt_bytes(o['per_device_bytes_per_request'])} on each of {req.tp} ranks"
    n = H.scalar(req.requests)
    if n != 1:
        s += f"; {H.plural(n, 'request')} need {H.fmt_bytes(o['bytes_total'])}"
    if "max_requests" in o:
        m = H.scalar(o["max_requests"])
        count = "any number of requests fit" if m is None else f"{H.plural(m, 'request')} {'fits' if m == 1 else 'fit'}"
        if req.hardware is not None:
            s += f"; {count} on {req.tp or 1} × {req.hardware}" + (" after the weights" if weights else "")
        else:
            s += (f"; {count} in the {H.fmt_bytes(o['memory_budget_bytes'])} left for KV" + (" after the weights" if weights else ""))
    return H.sentence(s + H.sweep_note(req.tokens, req.requests, req.memory_budget_bytes))


def _device_memory(req: KVCacheRequest, lookup: Lookup, res: Result, tp: int) -> np.ndarray:
    """Usable memory of the hardware over the ranks (the memory rule), before the weights."""
    hw = hardware_spec(lookup, req.hardware, "hardware")
    note_scope(res, hw)
    capacity = hw.require("memory_bytes", "hardware")
    hw.cite(res, "memory_bytes")
    per_dev = float(explain_memory_rule(res, capacity, req.memory_utilization, req.runtime_reserve_bytes))
    usable = res.step("device memory", "usable = usable memory per device × ranks", f"{fmt_bytes(per_dev)} × {tp}",
                      per_dev * tp, "B")
    res.assume("Weights are split evenly over the ranks; activations, CUDA graphs and workspace live in the memory "
               "the utilization leaves free.")
    return np.asarray(usable, dtype=float)


def _assumptions(res: Result, fmt: Fmt, groups: list[GroupSpec], req) -> None:
    res.assume(
        f"Cache format {fmt.name}: {fmt.layout}. Scale blocks are counted per entry of each stream and never span entries.",
        "Logical payload of the cache: allocator slack, metadata, CUDA graphs and workspace are not included"
        + ("." if req.page_size_tokens else "; no page rounding (give `page_size_tokens`)."),
        "A window stream keeps min(N, window) entries (the window is full once N ≥ window); a compressed stream keeps "
        "floor(N / ratio) entries, an unfinished block is not counted.",
        "bytes_per_token counts full-history streams only; windowed/compressed streams and recurrent state are in "
        "bytes_per_request.",
    )
    if any(g.state_elements for g in groups):
        res.assume("Recurrent state is fixed per request (does not grow with tokens); short-conv state, projections and "
                   "gates are not included unless given as state.")
    if req.tp is not None:
        res.assume("Tensor parallelism: streams that split by KV heads give each rank ceil(h / TP) heads (a head is "
                   "replicated when there are fewer KV heads than ranks); latent (MLA) and shared streams are replicated "
                   "on every rank; recurrent state splits by its heads where known, else it is replicated.")


CALCULATORS = [
    Calculator(
        name="kv-cache",
        profile=Profile(6e-07, 438, 173),
        mcp_tool=True,
        compare=("kv_format", ("bf16", "fp8", "q4_0")),
        family="kv_sizing",
        title="KV cache and attention state size",
        summary="Bytes of KV cache and recurrent state per token, per request and in total for any attention family "
                "(GQA/MHA, MLA, sliding windows, compressed CSA/HCA, KDA/SSM state), per device under tensor "
                "parallelism, and how many requests fit a memory budget.",
        description="For each layer group and stream: layers × bytes per entry × retained entries, where entries = "
                    "min(N, window) or floor(N / ratio); plus layers × state elements × state bytes. Formats include "
                    "block formats (q8_0 = 34 B per 32 values, q4_0 = 18 B per 32, fp4_block16 = 9 B per 16). "
                    "Per-device bytes split KV heads over ranks (replicated when fewer heads than ranks) and "
                    "replicate latent caches. A memory budget (bytes, or a hardware id's usable memory) minus the weights "
                    "(a model's, in its published or the given format; `subtract_weights: false` for a KV-only budget) "
                    "gives max_requests.",
        request_model=KVCacheRequest,
        outputs_model=KVCacheOutputs,
        compute=compute,
        example={"model": "qwen3-8b", "kv_format": "bf16", "tokens": 8192, "requests": 4, "tp": 2,
                 "memory_budget_bytes": 40 * 2**30},
        cases=("model-resource-accounting", "kv-quantization-and-execution", "model-parallelism", "hybrid-prefix-state",
               "parallel-switching-and-state", "memory-bandwidth-and-concurrency"),
        sweepable=("tokens", "requests", "memory_budget_bytes"),
        chart=Chart(x="tokens", y=("bytes_total", "bytes_per_request"), x_label="context tokens per request", y_label="KV cache",
                    x_scale="linear", y_unit="B", limit="memory_budget_bytes", limit_label="KV budget",
                    fits="fits"),
        families=("prefix_cache",),
        extra_examples=(
            {"model": "deepseek-v4-flash", "tokens": [1024, 8192, 65536]},
            {"model": "kimi-k3", "tokens": 8192, "tp": 8},
            {"architecture": {"layer_groups": [{"count": 18, "streams": [{"dim": 1024, "window": 128}], "kv_heads": 8},
                                               {"count": 18, "streams": [{"dim": 1024}], "kv_heads": 8}]},
             "tokens": [1024, 131072], "kv_format": "fp8"},
            {"model": "llama-3.1-70b", "tokens": 131072, "kv_format": "fp8", "tp": 8, "hardware": "h100-sxm"},
        ),
    ),
]

