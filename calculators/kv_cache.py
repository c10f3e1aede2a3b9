"""KV / attention-state size for any attention family (the DESIGN's `kv-cache` contract).

A model is a list of layer groups; each layer of a group keeps *streams* (a stream stores `dim`
values per retained entry) and optionally a fixed recurrent state of `state_elements` values.
Retained entries at N tokens: `min(N, window)` for a window stream, `floor(N / ratio)` for a
compressed stream (both set: `min(floor(N / ratio), window)`, i.e. the window counts entries).
GQA/MHA: `dim = 2·kv_heads·head_dim`; MLA: `dim = kv_lora_rank + rope_dim`; DeepSeek-V4 CSA/HCA:
several streams with a `ratio`; KDA/SSM: `state_elements`.

The engine here (`resolve_groups`, `kv_sizes`) is shared with the prefix-cache and kv-eviction
calculators so that they size KV exactly as this one does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.core import (
    CalcInputError,
    CalcRequest,
    Fraction,
    Lookup,
    NonNegFloat,
    NonNegFloatSweep,
    NonNegIntSweep,
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
from calculators.quantization import (
    Fmt,
    FormatField,
    format_label,
    model_weight_format,
    resolve_format,
)

SPLIT_ATTENTION = ("mha", "gqa", "gqa-swa", "hybrid-swa", "swa")  # model attention kinds whose KV splits by kv_heads

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
    state_dtype: FormatField | None = Field(None, description="Format of this group's state (default: the request's `state_dtype`).")


class Architecture(CalcRequest):
    layer_groups: Annotated[list[LayerGroup], Field(min_length=1, max_length=64)] = Field(
        description="Layer groups in streams form.",
        examples=[[{"count": 36, "streams": [{"dim": 2048, "window": None, "ratio": 1}], "kv_heads": 8}]])


class KVCacheRequest(CalcRequest):
    """KV / state bytes of `requests` requests of `tokens` tokens each."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id (its layer groups come from the store).", examples=["qwen3-8b"])
    architecture: Architecture | None = Field(None, description="Explicit layer groups instead of `model`.")
    kv_format: FormatField = Field("bf16", description="Cache format: bf16|fp16|fp32|fp8|q8_0|q4_0|fp4_block16 (and the other "
                                   "names of the quantization calculator) or {bits_per_value, group_size, scale_bytes_per_group}.",
                                   examples=["bf16"])
    state_dtype: FormatField = Field("fp32", description="Format of recurrent state (KDA/SSM).", examples=["fp32"])
    tokens: NonNegIntSweep = Field(description="Tokens in each request's history (prompt + generated). Sweepable.", examples=[8192])
    requests: NonNegIntSweep = Field(1, description="Concurrent requests. Sweepable.", examples=[1])
    tensor_parallel: Annotated[int, Field(ge=1, le=4096)] | None = Field(
        None, description="Tensor-parallel ranks sharing the layers: gives per-device bytes.", examples=[8])
    page_size_tokens: Annotated[int, Field(ge=1, le=10**9)] | None = Field(
        None, description="Paged allocation: each stream's retained entries round up to whole pages of this many entries.", examples=[16])
    memory_budget_bytes: NonNegFloatSweep | None = Field(
        None, description="Bytes available for KV across the tensor-parallel group (per device × ranks). Sweepable.", examples=[4 * 2**30])
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: budget = device memory × ranks × utilization − weights.",
                                 examples=["h100-sxm"])
    weight_bytes: NonNegFloat | None = Field(None, description="Weights resident across the group, bytes (default: params_total × weight format).")
    weight_format: FormatField | None = Field(None, description="Format of the weights (default: the model's published weight dtype).")
    memory_utilization: Fraction = Field(1.0, description="Fraction of device memory the engine may use (vLLM's gpu_memory_utilization).")


# --------------------------------------------------------------------------- engine

@dataclass(frozen=True)
class StreamSpec:
    name: str
    dim: int
    window: int | None
    ratio: int
    heads: int | None           # heads the stream splits into under TP (None = replicated)

    @property
    def full(self) -> bool:
        return self.window is None and self.ratio == 1


@dataclass(frozen=True)
class GroupSpec:
    name: str
    count: int
    streams: tuple[StreamSpec, ...]
    state_elements: int
    state_heads: int | None
    state_fmt: Fmt | None


def _int(v) -> int:
    return int(v["value"] if isinstance(v, dict) else v)


def groups_from_model(rec: dict, res: Result | None, loc: str = "model") -> list[GroupSpec]:
    """A store model record's layer groups as specs (KV heads and state heads inferred from the record)."""
    raw = rec.get("layer_groups")
    if not raw:
        raise CalcInputError(loc, f"{rec.get('id', '?')} has no layer_groups; give `architecture` instead")
    attention = str(rec.get("attention", "")).lower()
    kv_heads = fact_value(rec, "kv_heads", required=False) if attention in SPLIT_ATTENTION else None
    state_heads = fact_value(rec, "linear_attention_heads", required=False)
    groups = []
    for g in raw:
        gh = g.get("kv_heads", kv_heads)
        sh = g.get("state_heads", state_heads)
        streams = tuple(StreamSpec(s.get("name") or "kv", _int(s["dim"]), None if s.get("window") is None else _int(s["window"]),
                                   _int(s.get("ratio") or 1), int(gh) if gh else None) for s in g.get("streams") or [])
        state = _int(g.get("state_elements") or 0)
        groups.append(GroupSpec(g.get("name") or "layers", _int(g["count"]), streams, state,
                                int(sh) if (sh and state) else None, None))
    if res is not None:
        prov = rec.get("layer_groups_provenance")
        if isinstance(prov, dict):
            res.cite({"record": rec.get("id"), "field": "layer_groups", "value": None, "source": prov.get("source"),
                      "locator": prov.get("locator"), "source_url": prov.get("source_url")})
        if kv_heads:
            res.cite(fact_source(rec, "kv_heads"))
        if state_heads and any(g.state_elements for g in groups):
            res.cite(fact_source(rec, "linear_attention_heads"))
    return groups


def groups_from_architecture(arch: Architecture, loc: str = "architecture") -> list[GroupSpec]:
    groups = []
    for i, g in enumerate(arch.layer_groups):
        for j, s in enumerate(g.streams):
            if g.kv_heads and s.dim % g.kv_heads:
                raise CalcInputError(f"{loc}.layer_groups.{i}.kv_heads",
                                     f"stream dim {s.dim} is not a multiple of kv_heads {g.kv_heads}")
        if g.state_heads and g.state_elements % g.state_heads:
            raise CalcInputError(f"{loc}.layer_groups.{i}.state_heads",
                                 f"state_elements {g.state_elements} is not a multiple of state_heads {g.state_heads}")
        sf = resolve_format(g.state_dtype, f"{loc}.layer_groups.{i}.state_dtype") if g.state_dtype is not None else None
        streams = tuple(StreamSpec(s.name or ("kv" if g.kv_heads else f"stream {j}"), s.dim, s.window, s.ratio, g.kv_heads)
                        for j, s in enumerate(g.streams))
        groups.append(GroupSpec(g.name or f"group {i}", g.count, streams, g.state_elements, g.state_heads, sf))
    return groups


def resolve_groups(req, lookup: Lookup, res: Result) -> tuple[list[GroupSpec], dict | None]:
    """Layer groups from `model` or `architecture` (exactly one)."""
    if (req.model is None) == (req.architecture is None):
        raise CalcInputError("model", "give exactly one of `model` (an id) or `architecture`")
    if req.model is not None:
        rec = fetch(lookup, "model", req.model, "model")
        return groups_from_model(rec, res), rec
    return groups_from_architecture(req.architecture), None


def kv_source(req, lookup: Lookup, res: Result, required: bool = True) -> tuple[list[GroupSpec] | None, Fmt | None, dict | None]:
    """KV description of the prefix-cache / kv-eviction requests: `model`, `architecture` or `kv_bytes_per_token`."""
    given = [k for k in ("model", "architecture", "kv_bytes_per_token") if getattr(req, k, None) is not None]
    if len(given) > 1:
        raise CalcInputError(given[1], "give only one of `model`, `architecture` or `kv_bytes_per_token`")
    if not given:
        if required:
            raise CalcInputError("model", "give `model` (an id), `architecture` or `kv_bytes_per_token`")
        return None, None, None
    if given[0] == "kv_bytes_per_token":
        groups = [GroupSpec("given bytes per token", 1, (StreamSpec("kv", 1, None, 1, None),), 0, None, None)]
        return groups, Fmt("given", 8.0 * req.kv_bytes_per_token, layout="bytes per token given directly"), None
    if given[0] == "model":
        rec = fetch(lookup, "model", req.model, "model")
        return groups_from_model(rec, res), resolve_format(req.kv_format, "kv_format"), rec
    return groups_from_architecture(req.architecture), resolve_format(req.kv_format, "kv_format"), None


def entries_at(tokens: np.ndarray, s: StreamSpec) -> np.ndarray:
    """Retained entries of a stream at `tokens` tokens (int64 arrays)."""
    e = tokens // s.ratio
    if s.window is not None:
        e = np.minimum(e, s.window)
    return e


def _rank_fraction(heads: int | None, tp: int) -> float:
    """Share of a head-split tensor on one rank: ceil(h / tp) / h (one whole head when h < tp)."""
    if not heads or tp <= 1:
        return 1.0
    return math.ceil(heads / tp) / heads


@dataclass
class Sizes:
    values_per_token: float
    bytes_per_token: float
    device_bytes_per_token: float
    values_per_request: np.ndarray
    bytes_per_request: np.ndarray
    device_bytes_per_request: np.ndarray
    state_elements: float
    state_bytes: float
    device_state_bytes: float
    pages_per_request: np.ndarray | None
    groups: list[dict]


def kv_sizes(groups: list[GroupSpec], fmt: Fmt, state_fmt: Fmt, tokens: np.ndarray, tp: int = 1,
             page: int | None = None) -> Sizes:
    """Per-request KV bytes of every group and stream at `tokens` (an int64 array)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    zero = np.zeros(tokens.shape, dtype=float)
    vpt = bpt = dbpt = 0.0
    values = zero.copy()
    total = zero.copy()
    device = zero.copy()
    st_el = st_b = st_db = 0.0
    pages = np.zeros(tokens.shape, dtype=np.int64) if page else None
    out_groups = []
    for g in groups:
        g_total = zero.copy()
        g_dev = zero.copy()
        streams_out = []
        for s in g.streams:
            e = entries_at(tokens, s)
            if page:
                npages = -(-e // page)
                pages = np.maximum(pages, npages)
                e_kept = npages * page
            else:
                e_kept = e
            eb = fmt.entry_bytes(s.dim)
            frac = _rank_fraction(s.heads, tp)
            deb = fmt.entry_bytes(s.dim * frac)
            b = g.count * eb * e_kept.astype(float)
            db = g.count * deb * e_kept.astype(float)
            values = values + g.count * s.dim * e.astype(float)
            g_total = g_total + b
            g_dev = g_dev + db
            if s.full:
                vpt += g.count * s.dim
                bpt += g.count * eb
                dbpt += g.count * deb
            streams_out.append({"name": s.name, "dim": s.dim, "window": s.window, "ratio": s.ratio,
                                "split_heads": s.heads, "entries": e_kept, "bytes": b})
        sf = g.state_fmt or state_fmt
        sb = g.count * sf.entry_bytes(g.state_elements)
        sdb = g.count * sf.entry_bytes(g.state_elements * _rank_fraction(g.state_heads, tp))
        st_el += g.count * g.state_elements
        st_b += sb
        st_db += sdb
        values = values + g.count * g.state_elements
        g_total = g_total + sb
        g_dev = g_dev + sdb
        total = total + g_total
        device = device + g_dev
        out_groups.append({"name": g.name, "count": g.count, "streams": streams_out, "state_elements": g.state_elements,
                           "state_bytes": sb, "bytes_per_request": g_total, "per_device_bytes_per_request": g_dev})
    return Sizes(vpt, bpt, dbpt, values, total, device, st_el, st_b, st_db, pages, out_groups)


def intify(a):
    """Integral numbers (arrays or scalars) print as integers."""
    arr_ = np.asarray(a, dtype=float)
    if arr_.size and np.all(np.isfinite(arr_)) and np.all(arr_ == np.round(arr_)) and np.all(np.abs(arr_) < 2**53):
        return out(arr_.astype(np.int64))
    return out(arr_)


def group_lines(groups: list[GroupSpec], fmt: Fmt, n0: int) -> list[str]:
    """Human formula pieces for the first point: count × dim × entries × bytes/value per stream."""
    parts = []
    for g in groups:
        for s in g.streams:
            e = int(entries_at(np.asarray(n0, dtype=np.int64), s))
            parts.append(f"{g.count}×{num(fmt.entry_bytes(s.dim))} B×{num(e)}")
    return parts


# --------------------------------------------------------------------------- calculator

def compute(req: KVCacheRequest, lookup: Lookup) -> Result:
    res = Result(inputs=req.model_dump(mode="json", exclude_none=True), outputs={})
    groups, rec = resolve_groups(req, lookup, res)
    fmt = resolve_format(req.kv_format, "kv_format")
    sfmt = resolve_format(req.state_dtype, "state_dtype", "fp32")
    tp = req.tensor_parallel or 1
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
        "kv_format": format_label(req.kv_format, fmt),
        "bytes_per_value": fmt.effective_bits / 8,
    }
    if req.page_size_tokens:
        outputs["pages_per_request"] = intify(sz.pages_per_request)
        outputs["page_bytes"] = intify(sz.bytes_per_token * req.page_size_tokens)
        res.step("pages", "pages = ceil(entries / page size) per stream; a page of all full-history layers holds page × bytes/token",
                 f"ceil({num(n0)} / {req.page_size_tokens}); {req.page_size_tokens} × {num(sz.bytes_per_token)} B",
                 sz.pages_per_request, "pages")

    per_req_group = sz.bytes_per_request
    if req.tensor_parallel is not None:
        dev_total = sz.device_bytes_per_request * requests
        res.step("per device", "KV heads split across ranks (ceil(h / TP) heads each, replicated when h < TP); latent "
                 "streams replicated; state split by state heads where known",
                 f"{fmt_bytes(first(sz.device_bytes_per_request))} per request on each of {tp} ranks",
                 dev_total, "B")
        outputs.update({
            "tensor_parallel": tp,
            "per_device_bytes_per_token": intify(sz.device_bytes_per_token),
            "per_device_bytes_per_request": intify(sz.device_bytes_per_request),
            "per_device_bytes": intify(dev_total),
            "bytes_all_devices": intify(dev_total * tp),
            "replication_factor": out(np.where(sz.bytes_per_request > 0, sz.device_bytes_per_request * tp
                                               / np.where(sz.bytes_per_request > 0, sz.bytes_per_request, 1.0), 1.0)),
        })
        per_req_group = sz.device_bytes_per_request * tp

    budget = None
    if req.hardware is None:
        for k in ("weight_bytes", "weight_format"):
            if getattr(req, k) is not None:
                raise CalcInputError(k, "only used with `hardware` (subtract weights from `memory_budget_bytes` yourself)")
    if req.hardware is not None:
        budget = _hardware_budget(req, lookup, res, rec, tp)
    elif "memory_budget_bytes" in x:
        budget = x["memory_budget_bytes"]
    if budget is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            fit = np.where(per_req_group > 0, np.maximum(budget, 0.0) / np.where(per_req_group > 0, per_req_group, 1.0), np.inf)
        maxr = np.floor(fit)
        res.step("max requests", "floor(budget / (bytes per request on all ranks))" if req.tensor_parallel else
                 "floor(budget / bytes_per_request)", f"floor({num(first(budget))} B / {num(first(per_req_group))} B)", maxr, "requests")
        outputs.update({"memory_budget_bytes": intify(budget), "requests_fit": out(fit), "max_requests": intify(maxr),
                        "fits": out(per_req_group * requests <= budget)})

    outputs["groups"] = [{
        "name": g["name"], "count": g["count"], "state_elements": g["state_elements"], "state_bytes": intify(g["state_bytes"]),
        "bytes_per_request": intify(g["bytes_per_request"]),
        **({"per_device_bytes_per_request": intify(g["per_device_bytes_per_request"])} if req.tensor_parallel else {}),
        "streams": [{"name": s["name"], "dim": s["dim"], "window": s["window"], "ratio": s["ratio"],
                     "entries": intify(s["entries"]), "bytes": intify(s["bytes"])} for s in g["streams"]],
    } for g in sz.groups]
    res.outputs = outputs
    _assumptions(res, fmt, groups, req)
    return res


def _hardware_budget(req: KVCacheRequest, lookup: Lookup, res: Result, rec: dict | None, tp: int):
    hw = fetch(lookup, "hardware", req.hardware, "hardware")
    mem = float(fact_value(hw, "memory_bytes", loc="hardware"))
    res.cite(fact_source(hw, "memory_bytes"))
    devices = int(hw.get("devices_in_scope") or 1)
    per_dev = mem / max(devices, 1)
    usable = per_dev * tp * req.memory_utilization
    res.step("device memory", "usable = memory per device × ranks × utilization",
             f"{fmt_bytes(per_dev)} × {tp} × {num(req.memory_utilization)}", usable, "B")
    if req.weight_bytes is not None:
        weights = req.weight_bytes
        res.step("weights", "given", fmt_bytes(weights), weights, "B")
    else:
        if rec is None:
            raise CalcInputError("weight_bytes", "with `hardware` and an explicit architecture give `weight_bytes` (0 if none)")
        params = float(fact_value(rec, "params_total", loc="model"))
        res.cite(fact_source(rec, "params_total"))
        wf = resolve_format(req.weight_format, "weight_format") if req.weight_format is not None else model_weight_format(rec)
        if wf is None:
            raise CalcInputError("weight_format", f"{rec.get('id')} publishes weights as {rec.get('weight_dtype')!r} (mixed); "
                                 "give `weight_format` or `weight_bytes`")
        weights = params * wf.effective_bits / 8
        res.step("weights", "params_total × bytes/param", f"{num(params)} × {num(wf.effective_bits / 8)} B ({wf.name})", weights, "B")
        res.assume("Weights are params_total × one bytes-per-parameter, split evenly over the ranks; embeddings, "
                   "activations, CUDA graphs and workspace are not subtracted (use `memory_utilization`).")
    budget = usable - weights
    res.step("KV budget", "budget = usable memory − weights", f"{fmt_bytes(usable)} − {fmt_bytes(weights)}", budget, "B")
    if budget < 0:
        res.assume("The weights alone exceed the usable memory: no request fits.")
    return np.asarray(budget, dtype=float)


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
    if req.tensor_parallel is not None:
        res.assume("Tensor parallelism: streams that split by KV heads give each rank ceil(h / TP) heads (a head is "
                   "replicated when there are fewer KV heads than ranks); latent (MLA) and shared streams are replicated "
                   "on every rank; recurrent state splits by its heads where known, else it is replicated.")


# Imported last: other families import this module's helpers, and the registry imports every family.
from calculators.base import Calculator, Chart

CALCULATORS = [
    Calculator(
        name="kv-cache",
        family="kv_sizing",
        title="KV cache and attention state size",
        summary="Bytes of KV cache and recurrent state per token, per request and in total for any attention family "
                "(GQA/MHA, MLA, sliding windows, compressed CSA/HCA, KDA/SSM state), per device under tensor "
                "parallelism, and how many requests fit a memory budget.",
        description="For each layer group and stream: layers × bytes per entry × retained entries, where entries = "
                    "min(N, window) or floor(N / ratio); plus layers × state elements × state bytes. Formats include "
                    "block formats (q8_0 = 34 B per 32 values, q4_0 = 18 B per 32, fp4_block16 = 9 B per 16). "
                    "Per-device bytes split KV heads over ranks (replicated when fewer heads than ranks) and "
                    "replicate latent caches. A budget (bytes, or a hardware id minus weights) gives max_requests.",
        request_model=KVCacheRequest,
        compute=compute,
        example={"model": "qwen3-8b", "kv_format": "bf16", "tokens": 8192, "requests": 4, "tensor_parallel": 2,
                 "memory_budget_bytes": 20 * 2**30},
        cases=("model-resource-accounting", "kv-quantization-and-execution", "model-parallelism", "hybrid-prefix-state",
               "parallel-switching-and-state", "memory-bandwidth-and-concurrency"),
        sweepable=("tokens", "requests", "memory_budget_bytes"),
        chart=Chart(x="tokens", y=("bytes_per_request",), x_label="tokens per request", y_label="bytes per request"),
        families=("prefix_cache",),
        extra_examples=(
            {"model": "deepseek-v4-flash", "tokens": [1024, 8192, 65536]},
            {"model": "kimi-k3", "tokens": 8192, "tensor_parallel": 8},
            {"architecture": {"layer_groups": [{"count": 18, "streams": [{"dim": 1024, "window": 128}], "kv_heads": 8},
                                               {"count": 18, "streams": [{"dim": 1024}], "kv_heads": 8}]},
             "tokens": [1024, 131072], "kv_format": "fp8"},
        ),
    ),
]
